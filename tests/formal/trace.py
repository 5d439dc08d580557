"""Prints signals of a SymbiYosys counterexample VCD, one line per step
(``python -m tests.formal.trace TRACE.vcd NAME...``; a NAME matches any
signal whose hierarchical name ends with it)."""

from __future__ import annotations

import sys


def read_vcd(path):
    scopes, names, values, times = [], {}, {}, []
    cur = {}
    with open(path) as f:
        for line in f:
            tok = line.split()
            if not tok:
                continue
            if tok[0] == "$scope":
                scopes.append(tok[2])
            elif tok[0] == "$upscope":
                scopes.pop()
            elif tok[0] == "$var":
                names.setdefault(tok[3], []).append(".".join(scopes[1:] + [tok[4]]))
            elif tok[0].startswith("#"):
                if times:
                    values[times[-1]] = dict(cur)
                times.append(int(tok[0][1:]))
            elif tok[0][0] == "b":
                cur[tok[1]] = int(tok[0][1:].replace("x", "0").replace("z", "0"), 2)
            elif tok[0][0] in "01xz" and len(tok) == 1:
                cur[tok[0][1:]] = 1 if tok[0][0] == "1" else 0
    if times:
        values[times[-1]] = dict(cur)
    return names, [values[t] for t in times]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    names, steps = read_vcd(argv[0])
    cols = []
    for want in argv[1:]:
        for code, full in names.items():
            if any(n == want or n.endswith("." + want) for n in full):
                cols.append((want, code))
                break
        else:
            print(f"no signal {want}", file=sys.stderr)
    print("step " + " ".join(w for w, _ in cols))
    for k, vals in enumerate(steps[::2]):   # two time points a step
        print(f"{k:4} " + " ".join(f"{vals.get(c, '-'):>{len(w)}x}"
                                   if isinstance(vals.get(c), int) else "-" for w, c in cols))


if __name__ == "__main__":
    main()
