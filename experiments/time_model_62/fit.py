import json, sys, numpy as np
for path in sys.argv[1:]:
    d = json.load(open(path)); rows = d["rows"]
    y = np.array([r["measured"] for r in rows])
    feats = {"1": np.ones(len(rows)), "dw": np.array([r["dw"] for r in rows]), "dy": np.array([r["dy"] for r in rows]),
             "n": np.array([r["tensors"] for r in rows], float), "x": np.array([r["crossed"] for r in rows], float)}
    print(path, "T_fp", round(d["T_fp"], 1), "T_full", round(d["T_full"], 1), "scales", round(d["dw_scale"], 3), round(d["dy_scale"], 3))
    pred0 = np.array([r["predicted"] for r in rows])
    e = (pred0 - y) / y; print(f"  as profiled: median {100*np.median(abs(e)):.1f} max {100*abs(e).max():.1f}")
    calib = [i for i, r in enumerate(rows) if r["label"] in ("head", "path", "full") or r["label"].startswith("random") and int(r["label"].split()[1]) < 6]
    test = [i for i in range(len(rows)) if i not in calib]
    for model in (["1", "dw", "dy"], ["1", "dw", "dy", "n"], ["1", "dw", "dy", "x"], ["1", "dw", "dy", "n", "x"]):
        X = np.stack([feats[f] for f in model], 1)
        w = np.linalg.lstsq(X[calib] / y[calib, None], np.ones(len(calib)), rcond=None)[0]
        e = (X @ w - y) / y
        loo = []
        for i in range(len(rows)):
            keep = [j for j in range(len(rows)) if j != i]
            wi = np.linalg.lstsq(X[keep] / y[keep, None], np.ones(len(keep)), rcond=None)[0]
            loo.append((X[i] @ wi - y[i]) / y[i])
        loo = np.abs(loo)
        print(f"  {'+'.join(model):14s} w={np.round(w, 3)}  fit on calib (9): test median {100*np.median(abs(e[test])):.1f} max {100*abs(e[test]).max():.1f} | LOO median {100*np.median(loo):.1f} max {100*loo.max():.1f}")
        if model == ["1", "dw", "dy"]:
            for i in test:
                print(f"     {rows[i]['label']:10s} n={rows[i]['tensors']:4d} x={rows[i]['crossed']:4d} err {100*e[i]:+.1f}")
