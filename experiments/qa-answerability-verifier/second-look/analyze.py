"""Second look at a verifier (2026-11-26): leave-one-article-out CV on validation, fits on the
training articles, ablations. Input: a pickle from collect.py. See ../results.md."""
import pickle, re, sys, itertools
import numpy as np
from optimize.evaluate import squad
from optimize.evaluate.answerability import roc_auc
class StandardScaler:
    def fit(self, X): self.m = X.mean(0); self.s = X.std(0) + 1e-9; return self
    def transform(self, X): return (X - self.m) / self.s
class LogisticRegression:
    def __init__(self, C=1.0, max_iter=100): self.l2 = 1.0 / C
    def fit(self, X, y):
        X1 = np.hstack([X, np.ones((len(X), 1))]); w = np.zeros(X1.shape[1]); y = y.astype(float)
        for _ in range(50):  # Newton
            p = 1 / (1 + np.exp(-X1 @ w)); g = X1.T @ (p - y) + self.l2 * np.r_[w[:-1], 0]
            H = (X1 * (p * (1 - p))[:, None]).T @ X1 + self.l2 * np.diag(np.r_[np.ones(len(w) - 1), 0])
            w -= np.linalg.solve(H, g)
        self.w = w; return self
    def decision_function(self, X): return np.hstack([X, np.ones((len(X), 1))]) @ self.w
from optimize.evaluate import squad
from optimize.evaluate.answerability import roc_auc
rows = pickle.load(open(sys.argv[1], "rb"))
STOP = set("a an the of in on at to for from by with and or is are was were be been being what which who whom whose when where why how did do does that this these those it its as than into about after before during under over between through not no".split())
def words(t): return re.findall(r"[a-z0-9]+", t.lower())
def lsm(x):
    x = x.astype(np.float64); m = x.max(); return x - m - np.log(np.exp(x - m).sum())
def qtype(q):
    q = q.lower()
    return [bool(re.search(r"\bwhen\b|\bwhat year\b|\bwhat date\b|\bwhat century\b", q)),
            bool(re.search(r"\bhow (many|much|long|far|old)\b|\bwhat percent", q)),
            bool(re.search(r"\bwho\b|\bwhom\b", q)), bool(re.search(r"\bwhy\b", q))]
def feats(r):
    ex = r["ex"]; s = r["start"].astype(np.float32); e = r["end"].astype(np.float32)
    question = ex.question.strip()  # as served: SQuAD's questions sometimes start with a space
    null = min(float(a[0] + b[0]) for a, b in zip(s, e))
    best = r["margin"] + null
    ps, ent = [], []
    for a, b in zip(s, e):
        la, lb = lsm(a[a > -1e3]), lsm(b[b > -1e3]); ps.append(la[0] + lb[0])
        pa = np.exp(la); ent.append(-(pa * la).sum())
    qw = [w for w in words(question) if w not in STOP]
    cw = set(words(ex.context))
    missing = sum(w not in cw for w in qw) / max(len(qw), 1)
    sent = next((x for x in re.split(r"(?<=[.!?])\s+", ex.context) if r["span"] and r["span"] in x), "")
    sw = set(words(sent))
    missing_sent = sum(w not in sw for w in qw) / max(len(qw), 1)
    names = squad.question_names(question)
    names_missing = sum(n.lower() not in ex.context.lower() for n in names)
    nums_missing = sum(n not in cw for n in re.findall(r"\b\d+\b", question))
    neg = int(bool(re.search(r"\b(not|never|n't|no)\b", question.lower())))
    when, howmany, who, why = qtype(question)
    digit = bool(re.search(r"\d", r["span"]))
    return [r["margin"], best, null, max(ps), min(ent), missing, missing_sent, names_missing, neg,
            len(words(r["span"])), len(qw), nums_missing, (when or howmany) and not digit, who and not re.search(r"[A-Z]", r["span"]),
            why]
NAMES = "margin best null logp_null ent missing missing_sent names_missing neg span_len q_len nums_missing type_nodigit who_nocap why".split()
val = [r for r in rows.values() if r["split"] == "validation"]; test = [r for r in rows.values() if r["split"] == "test"]
Xv = np.array([feats(r) for r in val], float); Xt = np.array([feats(r) for r in test], float)
yv = np.array([bool(r["ex"].answers) for r in val]); yt = np.array([bool(r["ex"].answers) for r in test])
art_v = np.array([r["ex"].article for r in val])
def per_q(rs):  # f1 if answered with span, f1 if abstaining
    return (np.array([squad.score(r["ex"], r["span"])[1] for r in rs]), np.array([squad.score(r["ex"], "")[1] for r in rs]))
Fv, Ft = per_q(val), per_q(test)
def f1_at(F, scores, thr): return 100 * np.where(scores > thr, F[0], F[1]).mean()
def tune(F, scores):
    order = np.argsort(scores); s = scores[order]; a, b = F[0][order], F[1][order]
    # threshold below all: answer everything; moving up abstains one at a time
    total = np.cumsum(np.r_[0, b - a])  # gain of abstaining on first k
    k = int(np.argmax(total)); base = a.sum()
    return (s[k - 1] + s[k]) / 2 if 0 < k < len(s) else (s[0] - 1 if k == 0 else s[-1] + 1)
def fit(X, y, cols, C=1.0):
    sc = StandardScaler().fit(X[:, cols]); lr = LogisticRegression(C=C).fit(sc.transform(X[:, cols]), y)
    return lambda Z: lr.decision_function(sc.transform(Z[:, cols]))
def cv(cols, C=1.0):
    """leave one validation article out: fit verifier+threshold on 3, score the 4th"""
    f1s = []
    for a in np.unique(art_v):
        tr, te = art_v != a, art_v == a
        g = fit(Xv[tr], yv[tr], cols, C)
        thr = tune((Fv[0][tr], Fv[1][tr]), g(Xv[tr]))
        f1s.append(f1_at((Fv[0][te], Fv[1][te]), g(Xv[te]), thr) * te.sum())
    return sum(f1s) / len(yv)
def cv_margin():
    f1s = []
    for a in np.unique(art_v):
        tr, te = art_v != a, art_v == a
        thr = tune((Fv[0][tr], Fv[1][tr]), Xv[tr, 0]); f1s.append(f1_at((Fv[0][te], Fv[1][te]), Xv[te, 0], thr) * te.sum())
    return sum(f1s) / len(yv)
print("CV margin only", round(cv_margin(), 2))
sets = {"logits": [0, 1, 2, 3, 4], "all12": list(range(11)), "all15": list(range(15)),
        "margin+lex": [0, 5, 6, 7, 8, 11, 12, 13], "margin+null+lex": [0, 2, 5, 6, 7, 8, 11, 12, 13]}
for name, cols in sets.items():
    for C in (0.1, 1.0):
        print(f"CV {name:16s} C={C}: {cv(cols, C):.2f}")
if len(sys.argv) > 2:
    for name in sys.argv[2].split(","):
        g = fit(Xv, yv, sets[name]); thr = tune(Fv, g(Xv)); st = g(Xt)
        print("TEST", name, round(f1_at(Ft, st, thr), 2), "AUC", round(roc_auc(list(st[yt]), list(st[~yt])), 3), "oracle", round(f1_at(Ft, st, tune(Ft, st)), 2))
    thr = tune(Fv, Xv[:, 0]); print("TEST margin", round(f1_at(Ft, Xt[:, 0], thr), 2))
tr = [r for r in rows.values() if r["split"] == "train"]
Xr = np.array([feats(r) for r in tr], float); yr = np.array([bool(r["ex"].answers) for r in tr])
print("train-article margin AUC", round(roc_auc(list(Xr[yr, 0]), list(Xr[~yr, 0])), 3))
# pooled out-of-fold AUC on validation
for name, cols in [("margin", [0]), *sets.items()]:
    oof = np.zeros(len(yv))
    for a in np.unique(art_v):
        m = art_v == a; oof[m] = fit(Xv[~m], yv[~m], cols)(Xv[m])
    g = fit(Xr, yr, cols); sv, st = g(Xv), g(Xt); thr = tune(Fv, sv)
    print(f"{name:16s} val OOF AUC {roc_auc(list(oof[yv]), list(oof[~yv])):.3f} | fit on train articles: val AUC {roc_auc(list(sv[yv]), list(sv[~yv])):.3f} val F1 {f1_at(Fv, sv, thr):.2f} test F1 {f1_at(Ft, st, thr):.2f} AUC {roc_auc(list(st[yt]), list(st[~yt])):.3f}")
print("ablation (fit on validation -> test; fit on train -> validation)")
base = sets["margin+null+lex"]
for drop in [None] + base[1:]:
    cols = [c for c in base if c != drop]
    g = fit(Xv, yv, cols); thr = tune(Fv, g(Xv)); st = g(Xt)
    h = fit(Xr, yr, cols); sv = h(Xv); thr2 = tune(Fv, sv)
    print(f"  without {NAMES[drop] if drop is not None else '-':14s} test F1 {f1_at(Ft, st, thr):.2f} AUC {roc_auc(list(st[yt]), list(st[~yt])):.3f} | val (fit train) F1 {f1_at(Fv, sv, thr2):.2f} AUC {roc_auc(list(sv[yv]), list(sv[~yv])):.3f}")
g = fit(Xv, yv, base, 1.0)
for name, cols in {"m+names": [0, 7], "m+null+names": [0, 2, 7], "six": [0, 2, 5, 7, 8, 11]}.items():
    g = fit(Xv, yv, cols); thr = tune(Fv, g(Xv)); st = g(Xt)
    h = fit(Xr, yr, cols); sv = h(Xv); thr2 = tune(Fv, sv)
    print(f"  {name:14s} test F1 {f1_at(Ft, st, thr):.2f} AUC {roc_auc(list(st[yt]), list(st[~yt])):.3f} | val (fit train) F1 {f1_at(Fv, sv, thr2):.2f} AUC {roc_auc(list(sv[yv]), list(sv[~yv])):.3f}")
