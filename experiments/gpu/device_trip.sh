#!/bin/bash
# Fit a job's trip to a lent GPU (the device tool: /work/.library/device/README.md): a call carries at most 64 MiB of working
# tree, and this repository tracks ~200 MB of weights. Run here, from the repo root:
#   untrack [MB]          untrack every tracked file over MB (default 5) for the calls, ignore it, print the
#                         tree size that will travel; the files stay on disk
#   restore               track them again (run before committing)
#   split FILE DIR [MB]   cut FILE into DIR/NAME.part.NN of MB (default 40) for files over the limit: carry
#                         one part per call while the machine is warm (30 s), and on the device append
#                         each to /tmp (`cat .gpu/NAME.part.* >> /tmp/NAME`): /tmp survives between warm
#                         calls, the checkout does not (each call re-sends it and drops what the last wrote)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
LIST=.git/device-untracked
EXCLUDE=.git/info/exclude
case "${1:-}" in
  untrack)
    limit=$(( ${2:-5} * 1024 * 1024 ))
    git ls-files -z | while IFS= read -r -d '' path; do
      if [ -f "$path" ] && [ "$(stat -c %s "$path")" -gt "$limit" ]; then echo "$path"; fi
    done > "$LIST"
    [ -s "$LIST" ] || { echo "nothing over the limit"; exit 0; }
    xargs -d '\n' git rm -q --cached -- < "$LIST"
    mkdir -p "$(dirname "$EXCLUDE")"
    sed 's|^|/|' "$LIST" >> "$EXCLUDE"
    echo "untracked for the trip ($(wc -l < "$LIST") files):"; cat "$LIST"
    (git ls-files -z; git ls-files -z --others --exclude-standard) | xargs -0 du -cb 2>/dev/null | tail -1 \
      | awk '{printf "working tree that travels: %.1f MB (carried paths come on top)\n", $1 / 1e6}'
    ;;
  restore)
    [ -f "$LIST" ] || { echo "nothing to restore"; exit 0; }
    xargs -d '\n' git reset -q HEAD -- < "$LIST"
    while IFS= read -r path; do
      grep -vxF "/$path" "$EXCLUDE" > "$EXCLUDE.new" || true
      mv "$EXCLUDE.new" "$EXCLUDE"
    done < "$LIST"
    rm "$LIST"
    git status --short
    ;;
  split)
    mkdir -p "$3"
    split -b "${4:-40}M" -d "$2" "$3/$(basename "$2").part."
    ls -la "$3"
    ;;
  *)
    sed -n 2,11p "$0"; exit 2
    ;;
esac
