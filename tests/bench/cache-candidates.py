#!/usr/bin/env python3
"""cache-candidates.py: the prototype of the cache-policy search of docs/cache-policy.md
("Beyond per-layer LFU"): candidate eviction policies replayed on a route trace with the
semantics of `coli-profile replay` (byte budgets, the prompt one batch per layer, eviction after
each batch sparing it, decode hits only), each policy told only the routing of the positions
before the one it decides. Its layer-lru and layer-lfu reproduce `coli-profile replay`'s to the
digit. Hit % over the decode positions of the first half of the trace (where a parameter is
chosen) and of the second (held out), and over all.

usage: tests/bench/cache-candidates.py [ROUTE.csv] [--global] [--budget MiB,...] [--policy NAME,...]
       tests/bench/cache-candidates.py [ROUTE.csv] --next-layer-recall
  policies: lru lfu lfu-weight lfu-recent lrfu0.99 lrfu0.97 lrfu0.95 lrfu0.90 lrfu0.80 transition
            transition2 transition8 transition32 transition128 learn
            learn-weight learn-density learn-nextlayer (the last two meant for --global)
(Per-layer shares that adapt to each layer's reuse are coli-profile replay's adapt-lru and
adapt-lfu, on the engine's simulator.)
"""
import collections, re, sys

MIB = 1048576


def load(path):
    hb, shape, rows = {}, {}, []
    with open(path) as f:
        for line in f:
            if line.startswith('#'):
                m = re.match(r'# layer=(\d+) expert_bytes=(\d+)', line)
                if m:
                    hb[int(m.group(1))] = int(m.group(2))
                for kv in line[2:].split():
                    if kv.startswith(('n_layer=', 'n_expert=', 'n_expert_used=')):
                        k, v = kv.split('=')
                        shape[k] = int(v)
                continue
            if line.startswith('turn'):
                continue
            _, ph, st, l, sl, x, w, _, _ = line.strip().split(',')
            rows.append((int(ph), int(st), int(l), int(sl), int(x), float(w)))
    L = shape['n_layer']
    P = max(r[1] for r in rows) + 1
    route = [[None] * L for _ in range(P)]
    phase = {}
    for ph, st, l, sl, x, w in sorted(rows):
        route[st][l] = (route[st][l] or []) + [(x, w)]
        phase[st] = ph
    npre = sum(1 for p in range(P) if phase.get(p) == 0)
    return L, [hb[l] for l in range(L)], P, npre, route


class Policy:
    """Eviction order: the lowest key first, ties least recent. position() is told each
    position's routing of a layer after it was played (prompt positions one by one)."""
    def __init__(self, L, E):
        self.cnt, self.last, self.lpos = collections.Counter(), {}, [-1] * L
        self.prompt = False  # set by replay while the prompt's batches play

    def position(self, l, p, r):
        for x, w in r:
            self.cnt[l, x] += 1
            self.last[l, x] = p
        self.lpos[l] = p

    def key(self, l, x):
        return 0


class LFU(Policy):
    def key(self, l, x):
        return self.cnt[l, x]


class WeightLFU(Policy):
    """LFU whose uses count the router's weight (x top_k, so a mean choice counts 1; the prompt's
    batch, weights unknown, 1 each)"""
    def __init__(self, L, E):
        super().__init__(L, E)
        self.wc = collections.Counter()

    def position(self, l, p, r):
        for x, w in r:
            self.wc[l, x] += w * len(r) if w else 1
        super().position(l, p, r)

    def key(self, l, x):
        return self.wc[l, x]


class LRFU(Policy):
    """counts decayed by g per position of the layer (LRFU, Lee et al.): g 1 is LFU"""
    def __init__(self, L, E, g):
        super().__init__(L, E)
        self.g, self.c = g, {}

    def position(self, l, p, r):
        for x, w in r:
            q = self.last.get((l, x), p)
            self.c[l, x] = self.c.get((l, x), 0) * self.g ** (p - q) + 1
        super().position(l, p, r)

    def key(self, l, x):
        q = self.last.get((l, x))
        return 0 if q is None else self.c[l, x] * self.g ** (self.lpos[l] - q)


class LFURecent(Policy):
    """the last position's experts kept first, then LFU"""
    def key(self, l, x):
        q = self.last.get((l, x))
        return (q is not None and q == self.lpos[l], self.cnt[l, x])


def age_bucket(a):
    return a if a <= 4 else 5 if a <= 6 else 6 if a <= 10 else 7 if a <= 20 else 8 if a <= 40 else 9


def count_bucket(c):
    b = 0
    while c > 1 and b < 12:
        c, b = c / 2, b + 1
    return b


class Learn(Policy):
    """key: the chance that the expert is chosen at its layer's next position, learnt online
    from the positions so far over (age since last use, count[, weight rank at last use])"""
    def __init__(self, L, E, weight=False):
        super().__init__(L, E)
        self.E, self.weight, self.rank = E, weight, {}
        self.tab = collections.defaultdict(lambda: [0.0, 0.0])

    def feat(self, l, x, p):
        q = self.last.get((l, x))
        if q is None:
            return None
        f = (age_bucket(p - q), count_bucket(self.cnt[l, x]))
        return f + (self.rank[l, x],) if self.weight else f

    def position(self, l, p, r):
        chosen = set(x for x, _ in r)
        for x in range(self.E):
            f = self.feat(l, x, p)
            if f is not None:
                t = self.tab[f]
                t[0] += x in chosen
                t[1] += 1
        for j, (x, w) in enumerate(r):
            self.rank[l, x] = j
        super().position(l, p, r)

    def key(self, l, x):
        f = self.feat(l, x, self.lpos[l] + 1)
        if f is None:
            return 0
        t = self.tab[f]
        return (t[0] + 0.05) / (t[1] + 1)


class Density(Learn):
    """one global pool: Learn's chance divided by the batches until the expert's layer runs
    again (hits per slot-time: MIN's furthest-next-use, estimated)"""
    def __init__(self, L, E):
        super().__init__(L, E)
        self.L, self.layer = L, 0

    def position(self, l, p, r):
        super().position(l, p, r)
        self.layer = l

    def key(self, l, x):
        return super().key(l, x) / ((l - self.layer - 1) % self.L + 1)


class NextLayer(Learn):
    """Learn, and for the experts of the layer that runs next in the same token, the chance
    learnt over (Learn's features, how often the expert followed the experts just chosen one
    layer up in earlier tokens): next-layer prediction as eviction's hint (global pools)"""
    def __init__(self, L, E):
        super().__init__(L, E)
        self.C, self.N = collections.defaultdict(collections.Counter), collections.Counter()
        self.cur, self.tc = None, collections.defaultdict(lambda: [0.0, 0.0])

    def follow(self, l, y):
        if not self.cur or self.cur[0] != l - 1:
            return None
        num = sum(self.C[l - 1, x][y] for x in self.cur[1])
        den = sum(self.N[l - 1, x] for x in self.cur[1])
        return 0 if den == 0 else min(9, int(20 * num / den))

    def position(self, l, p, r):
        chosen = set(x for x, _ in r)
        if not self.prompt and self.cur and self.cur[0] == l - 1 and self.cur[2] == p:
            for y in range(self.E):
                t = self.tc[self.feat(l, y, p), self.follow(l, y)]
                t[0] += y in chosen
                t[1] += 1
            for x in self.cur[1]:
                self.N[l - 1, x] += 1
                for y in chosen:
                    self.C[l - 1, x][y] += 1
        super().position(l, p, r)
        self.cur = None if self.prompt else (l, chosen, p)

    def key(self, l, x):
        if self.cur and l == self.cur[0] + 1:
            t = self.tc[self.feat(l, x, self.lpos[l] + 1), self.follow(l, x)]
            if t[1] >= 20:
                return t[0] / t[1]
        return super().key(l, x)


class Transition(Policy):
    """per layer: the chance that the expert is chosen at the next position given the experts just
    chosen at this one, from how often it followed each of them in the layer's earlier positions
    (a Markov model of the layer's routing, self-transitions included: recency where it repeats);
    ties and unseen: LFU"""
    def __init__(self, L, E):
        super().__init__(L, E)
        self.M, self.N = collections.defaultdict(collections.Counter), collections.Counter()
        self.now = {}

    def position(self, l, p, r):
        chosen = [x for x, _ in r]
        if not self.prompt and l in self.now:
            for x in self.now[l]:
                self.N[l, x] += 1
                self.M[l, x].update(chosen)
        super().position(l, p, r)
        self.now[l] = [] if self.prompt else chosen

    def key(self, l, x):
        S = self.now.get(l, [])
        den = sum(self.N[l, y] for y in S)
        return (sum(self.M[l, y][x] for y in S) / den if den else 0, self.cnt[l, x])


class TransitionPrior(Transition):
    """Transition's chance shrunk toward the expert's rate so far (uses per position of the
    layer), a weighing a of pseudo-observations: (followed + a x rate) / (seen + a)"""
    def __init__(self, L, E, a):
        super().__init__(L, E)
        self.a, self.seen = a, collections.Counter()

    def position(self, l, p, r):
        super().position(l, p, r)
        self.seen[l] += 1

    def key(self, l, x):
        S = self.now.get(l, [])
        rate = self.cnt[l, x] / max(1, self.seen[l])
        den = sum(self.N[l, y] for y in S)
        return ((sum(self.M[l, y][x] for y in S) + self.a * rate) / (den + self.a), self.cnt[l, x])


POLICIES = {'lru': Policy, 'lfu': LFU, 'lfu-weight': WeightLFU, 'lfu-recent': LFURecent, 'learn': Learn,
            'learn-weight': lambda L, E: Learn(L, E, True), 'learn-density': Density, 'learn-nextlayer': NextLayer,
            'transition': Transition}
for a in (2, 8, 32, 128):
    POLICIES['transition%d' % a] = (lambda a: lambda L, E: TransitionPrior(L, E, a))(a)
for g in (0.99, 0.97, 0.95, 0.90, 0.80):
    POLICIES['lrfu%.2f' % g] = (lambda g: lambda L, E: LRFU(L, E, g))(g)


def batches_of(trace):
    """(position, layer, [(expert, weight)]): the prompt one batch per layer (each expert at its
    last use, position None), then each decode position's layers"""
    L, cost, P, npre, route = trace
    batches = []
    for l in range(L):
        order = []
        for p in range(npre):
            for x, w in route[p][l] or []:
                if x in order:
                    order.remove(x)
                order.append(x)
        batches.append((None, l, [(x, 0.0) for x in order]))
    return batches + [(p, l, route[p][l]) for p in range(npre, P) for l in range(L) if route[p][l]]


def replay(trace, make, budget_mib, per_layer):
    """decode hits and gets of the first half, the second half"""
    L, cost, P, npre, route = trace
    E = 1 + max(x for p in route for r in p if r for x, _ in r)
    pol = make(L, E)
    mid = npre + (P - npre) // 2
    share = int(budget_mib * MIB) // L
    res, used = collections.defaultdict(dict), collections.Counter()
    hits, gets, tick = [0, 0], [0, 0], 0
    batches = batches_of(trace)
    for p, l, b in batches:
        pool = l if per_layer else 0
        R = res[pool]
        inb = set((l, x) for x, _ in b)
        for x, w in b:
            tick += 1
            hit = (l, x) in R
            if p is not None:
                h = p >= mid
                gets[h] += 1
                hits[h] += hit
            if not hit:
                used[pool] += cost[l]
            R[l, x] = tick
        pol.prompt = p is None
        pol.position(l, npre - 1 if p is None else p, b)  # the prompt counts once per expert, as in the simulator
        lim = share if per_layer else int(budget_mib * MIB)
        if used[pool] > lim:
            for _, _, g in sorted((pol.key(*g), t, g) for g, t in R.items() if g not in inb):
                if used[pool] <= lim:
                    break
                del R[g]
                used[pool] -= cost[g[0]]
    return hits, gets


def next_layer_recall(trace):
    """recall@top_k over decode of the next-layer predictor learnt online (the experts that most
    often followed this token's experts one layer up, in earlier tokens), and of the previous
    token's experts of the layer"""
    L, cost, P, npre, route = trace
    C = collections.defaultdict(collections.Counter)
    got = prev = total = 0
    for p in range(P):
        for l in range(L - 1):
            a, b = route[p][l], route[p][l + 1]
            if not a or not b:
                continue
            up, chosen = [x for x, _ in a], set(x for x, _ in b)
            if p >= npre:
                score = collections.Counter()
                for x in up:
                    score.update(C[l, x])
                got += len(chosen & set(y for y, _ in score.most_common(len(b))))
                prev += len(chosen & set(x for x, _ in route[p - 1][l + 1] or []))
                total += len(chosen)
            for x in up:
                C[l, x].update(chosen)
    print('next-layer predictor recall: %.3f; previous token\'s experts: %.3f' % (got / total, prev / total))


def main(argv):
    path = 'tests/data/traces/qwen3-30b-a3b.route.csv'
    budgets, names, per_layer = [1000, 1500, 2000, 3000, 4000], list(POLICIES), True
    args = iter(argv)
    for a in args:
        if a == '--global':
            per_layer = False
        elif a == '--budget':
            budgets = [float(v) for v in next(args).split(',')]
        elif a == '--policy':
            names = next(args).split(',')
        elif a == '--next-layer-recall':
            names = None
        else:
            path = a
    trace = load(path)
    if names is None:
        return next_layer_recall(trace)
    print('Decode hit %% of %s, %s pools; first half / second half (held out) / all' %
          (path, 'per-layer' if per_layer else 'one global'))
    print('| policy | ' + ' | '.join('%g MiB' % b for b in budgets) + ' |')
    print('|---|' + '---:|' * len(budgets))
    for n in names:
        cells = []
        for b in budgets:
            h, g = replay(trace, POLICIES[n], b, per_layer)
            cells.append('%.1f / %.1f / %.1f' % (100 * h[0] / g[0], 100 * h[1] / g[1], 100 * sum(h) / sum(g)))
        print('| %s | %s |' % (n, ' | '.join(cells)), flush=True)


if __name__ == '__main__':
    main(sys.argv[1:])
