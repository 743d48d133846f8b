#!/usr/bin/env python3
"""Fails when the modules of a crate depend on each other in a cycle.

usage: scripts/module-cycles.py crates/*/src simulations/src

For each source folder given, builds the graph of its files (one node per
module file) from every `crate::…`, `super::…` and `self::…` path outside
`#[cfg(test)]` code and every path through a child module (`acl::…` in
`config/mod.rs`, which `pub use acl::Action;` re-exports), and reports
each cycle among the modules of one folder, a child folder taken whole
(`config` ↔ `refusal` when `config/acl.rs` uses `refusal` and `refusal.rs`
uses `config`). A child using its parent's items and the parent using the
child is not a cycle. Exit status 1 if there is any.
"""
import re, os, sys
def modpath(root, path):
    rel=os.path.relpath(path, root)[:-3].split('/')
    if rel[-1] in ('mod','lib','main'): rel=rel[:-1]
    return rel
def resolve(cur, p, is_mod):
    # p: list of segments starting with crate/super/self
    base = [] 
    segs=p
    if segs[0]=='crate': base=[]; segs=segs[1:]
    elif segs[0]=='super':
        base = cur[:] if is_mod else cur[:]
        base = base[:-1]
        segs=segs[1:]
        while segs and segs[0]=='super': base=base[:-1]; segs=segs[1:]
    elif segs[0]=='self': base=cur[:]; segs=segs[1:]
    return base+segs
def sccs_of(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    idx, low, st, on, out, c = {}, {}, [], set(), [], [0]
    def sc(v):
        idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
        for w in graph[v]:
            if w not in idx: sc(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            comp = []
            while True:
                w = st.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(comp)
    for v in list(graph):
        if v not in idx: sc(v)
    return out
sys.setrecursionlimit(10000)
found = False
for root in sys.argv[1:]:
    files={}
    for dp,dn,fns in os.walk(root):
        for fn in fns:
            if fn.endswith('.rs') and not fn.endswith('tests.rs') and fn!='tests.rs':
                p=os.path.join(dp,fn); files[tuple(modpath(root,p))]=p
    mods=set(files)
    edges=set()
    for m,p in files.items():
        txt=open(p).read()
        txt=txt.split('#[cfg(test)]')[0]
        txt=re.sub(r'//[^\n]*', '', txt)  # comments name modules, they do not use them
        is_mod=p.endswith('mod.rs') or p.endswith('lib.rs')
        for mm in re.finditer(r'\b((?:crate|super|self)(?:::\w+)+)', txt):
            segs=mm.group(1).split('::')
            full=resolve(list(m),segs,is_mod)
            # longest prefix that is a module
            best=None
            for k in range(len(full),-1,-1):
                if tuple(full[:k]) in mods: best=tuple(full[:k]); break
            if best is not None and best!=m:
                edges.add((m,best))
        # also `use {a, b}` groups in `use super::{..}`
        for mm in re.finditer(r'\b(crate|super)::\{([^}]*)\}', txt):
            for item in mm.group(2).split(','):
                item=item.strip().split(' ')[0]
                if not item: continue
                segs=[mm.group(1)]+item.split('::')
                full=resolve(list(m),segs,is_mod)
                best=None
                for k in range(len(full),-1,-1):
                    if tuple(full[:k]) in mods: best=tuple(full[:k]); break
                if best is not None and best!=m: edges.add((m,best))
        # a child module named without a prefix (`mod acl; pub use
        # acl::Action;` in config/mod.rs): whoever takes the item through
        # this module depends on the child
        for mm in re.finditer(r'(?<![\w:])(\w+)::', txt):
            child = tuple(list(m) + [mm.group(1)])
            if child in mods and child != m:
                edges.add((m, child))
    # Cycles among siblings: for every folder, its child modules, each
    # with everything below it taken as one node. A module and its own
    # parent (a child using `super::Type`, the parent using the child) are
    # not a cycle; two siblings, or two subtrees, that use each other are.
    parents = {m[:k] for m in mods for k in range(len(m))}
    for parent in sorted(parents):
        n = len(parent)
        def node(x):
            return x[:n + 1] if len(x) > n and x[:n] == parent else None
        graph = {}
        for a, b in edges:
            na, nb = node(a), node(b)
            if na and nb and na != nb:
                graph.setdefault(na, set()).add(nb)
                graph.setdefault(nb, set())
        for comp in sccs_of(graph):
            found = True
            print(f"{root}: module cycle: {' <-> '.join('::'.join(x) for x in sorted(comp))}")
if found:
    sys.exit(1)
print(f"no module cycles in {len(sys.argv) - 1} source folders")
