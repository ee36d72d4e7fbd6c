"""The app's tabs that have grown past a few lines, each a function that builds itself into the open
gr.Blocks; app.py assembles them. Like app.py, they call models/ and turn user errors into messages."""
