# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=False
"""Compiled core of :class:`t3.sim.engine.Engine`: the same event loop, progressive filling and memory
model as the Python engine, statement for statement, on C arrays.

It runs the schedules whose resources use the default policy (one pool, first come) or memory-controller
arbitration (:class:`t3.hardware.mca.McaPolicy`, as :meth:`Policy.compiled` describes it), with
semaphores (T3's tracker), priority levels and block dispatch, and whose ops have no callbacks (the
functional mode), traced or not, with or without a seed and jitter (the same random stream drawn at
the same points: shuffles of simultaneous events, delays stretched); :meth:`Engine.run` runs every
other schedule in Python. Every floating-point operation is the Python engine's, in the same
order, and the allocations are memoised under the same keys in the same tables (``_amemo`` per run,
the process-wide fills of :mod:`t3.sim.engine`), so a result is the Python engine's bit for bit
(``tests/test_native_engine.py`` compares them). A run that cannot finish is handed back (``None``):
the caller reruns it in Python, which names the deadlock.
"""

from libc.math cimport ceil, floor
from libc.stdlib cimport free, malloc

cdef extern from *:
    """
    #ifndef T3_NATIVE_SOURCE
    #define T3_NATIVE_SOURCE ""
    #endif
    """
    const char* T3_NATIVE_SOURCE

# sha256 (first 16 hex digits) of the source this module was compiled from ("" if built by hand)
SOURCE_SHA256 = (<bytes>T3_NATIVE_SOURCE).decode()

cdef double INF = float("inf")
cdef double EPS = 1e-9  # t3.sim.engine._EPS
cdef int SPLIT_MIN = 6  # t3.sim.engine.SPLIT_MIN
cdef int MAX_LEVELS = 16  # distinct priorities per schedule (more: the Python engine runs it)


cdef void* _alloc(size_t n) except NULL:
    cdef void* p = malloc(n if n > 0 else 1)
    if p == NULL:
        raise MemoryError()
    return p


cdef class Static:
    """What a run needs that depends on the schedule only (built once per schedule)."""

    cdef int n, nres, nfirst, any_mem
    cdef int *dem_off
    cdef int *dem_r
    cdef double *dem_a
    cdef double *xdem_a
    cdef int *dem1_off
    cdef int *dem1_r
    cdef double *dem1_a
    cdef double *xdem1_a
    cdef int *mem_off
    cdef int *mem_r
    cdef double *mem_a
    cdef double *mem_w
    cdef char *mem_closed
    cdef char *uniq
    cdef int *prio
    cdef double *xmax
    cdef double *cap0
    cdef double *window
    cdef double *delay
    cdef int *kid_off
    cdef int *kids
    cdef int *indeg0
    cdef int *first
    cdef double *cap
    cdef char *is_mem
    cdef double *turn
    cdef double *lat0
    cdef double *serv
    cdef int *excl_off  # per op: its exclusive partitions (Resource.parent >= 0), in demand order
    cdef int *excl_r
    cdef int *parent  # per resource: Resource.parent
    cdef int any_excl
    cdef int *q_off  # per op: a GEMM wave's caps, (resource, units, demand, tiles, width, cluster) (Allocator.quant)
    cdef int *q_r
    cdef double *q_u
    cdef double *q_a
    cdef double *q_t
    cdef double *q_w
    cdef double *q_m
    cdef int *admit  # per op: Op.admit, Op.fills (block dispatch; -1: none)
    cdef int *fillr
    cdef list sig
    cdef object rkey
    # semaphores (Schedule.semaphores): capacities; per op the (semaphore, units) it acquires / releases
    cdef int nsem
    cdef int *sem_cap
    cdef int *acq_off
    cdef int *acq_s
    cdef int *acq_u
    cdef int *rel_off
    cdef int *rel_s
    cdef int *rel_u
    # resource policies (Policy.compiled): 0 the default, 1 memory-controller arbitration (McaPolicy:
    # threshold, starvation share, queue bytes, service time); policed: any resource not the default
    cdef int policed
    cdef int *pol
    cdef double *pol_thr
    cdef double *pol_share
    cdef double *pol_qb
    cdef double *pol_serv

    def __cinit__(self):
        self.n = 0

    def __dealloc__(self):
        cdef void* ps[27]
        ps[:] = [self.dem_off, self.dem_r, self.dem_a, self.xdem_a, self.dem1_off, self.dem1_r, self.dem1_a,
                 self.xdem1_a, self.mem_off, self.mem_r, self.mem_a, self.mem_w, self.mem_closed, self.uniq,
                 self.prio, self.xmax, self.cap0, self.window, self.delay, self.kid_off, self.kids,
                 self.indeg0, self.first, self.cap, self.is_mem, self.turn, self.lat0]
        for p in ps:
            free(p)
        free(self.serv)
        free(self.excl_off)
        free(self.excl_r)
        free(self.parent)
        free(self.q_off)
        free(self.q_r)
        free(self.q_u)
        free(self.q_a)
        free(self.q_t)
        free(self.q_w)
        free(self.q_m)
        free(self.admit)
        free(self.fillr)
        cdef void* qs[12]
        qs[:] = [self.sem_cap, self.acq_off, self.acq_s, self.acq_u, self.rel_off, self.rel_s, self.rel_u,
                 self.pol, self.pol_thr, self.pol_share, self.pol_qb, self.pol_serv]
        for p in qs:
            free(p)


def prepare(sched, list pols, dict sigs, sig_numbers, dict rkeys, rkey_numbers):
    """The schedule's :class:`Static`, or None when the Python engine must run it (callbacks, too many
    priority levels; the caller checks that every resource's policy is one the core implements and
    gives their descriptions, ``pols``, from :meth:`Policy.compiled`). What it derives is what ``t3.sim.engine._static`` and :class:`Allocator` derive (children,
    static maximum rates, per-op preparation), and the signatures and resource key are numbered in the
    same process-wide tables (``sigs``, ``rkeys``) with the same counters, so the memoised fillings
    are shared with the Python engine."""
    cdef Static st
    cdef int n, nres, i, k, r, nd, nk, nq, lk, q, dup, p, p1, pm, pe, pq
    cdef double x, a, w, rd, c0, v, c
    ops = sched.ops
    res = sched.resources
    cdef int na = 0, nr = 0
    prios = set()
    nd = nk = nq = 0
    for op in ops:
        if op.on_start is not None or op.on_finish is not None:
            return None
        prios.add(op.prio)
        nd += len(op.demands)
        nk += len(op.deps)
        nq += len(op.caps)
        na += len(op.acquire)
        nr += len(op.release)
    if len(prios) > MAX_LEVELS:
        return None
    n = len(ops)
    nres = len(res)
    st = Static()
    st.n, st.nres = n, nres
    st.dem_off = <int*>_alloc((n + 1) * sizeof(int))
    st.dem_r = <int*>_alloc(nd * sizeof(int))
    st.dem_a = <double*>_alloc(nd * sizeof(double))
    st.xdem_a = <double*>_alloc(nd * sizeof(double))
    st.dem1_off = <int*>_alloc((n + 1) * sizeof(int))
    st.dem1_r = <int*>_alloc(nd * sizeof(int))
    st.dem1_a = <double*>_alloc(nd * sizeof(double))
    st.xdem1_a = <double*>_alloc(nd * sizeof(double))
    st.mem_off = <int*>_alloc((n + 1) * sizeof(int))
    st.mem_r = <int*>_alloc(nd * sizeof(int))
    st.mem_a = <double*>_alloc(nd * sizeof(double))
    st.mem_w = <double*>_alloc(nd * sizeof(double))
    st.mem_closed = <char*>_alloc(nd * sizeof(char))
    st.uniq = <char*>_alloc(n * sizeof(char))
    st.prio = <int*>_alloc(n * sizeof(int))
    st.xmax = <double*>_alloc(n * sizeof(double))
    st.cap0 = <double*>_alloc(n * sizeof(double))
    st.window = <double*>_alloc(n * sizeof(double))
    st.delay = <double*>_alloc(n * sizeof(double))
    st.kid_off = <int*>_alloc((n + 1) * sizeof(int))
    st.kids = <int*>_alloc(nk * sizeof(int))
    st.indeg0 = <int*>_alloc(n * sizeof(int))
    st.cap = <double*>_alloc(nres * sizeof(double))
    st.is_mem = <char*>_alloc(nres * sizeof(char))
    st.turn = <double*>_alloc(nres * sizeof(double))
    st.lat0 = <double*>_alloc(nres * sizeof(double))
    st.serv = <double*>_alloc(nres * sizeof(double))
    st.excl_off = <int*>_alloc((n + 1) * sizeof(int))
    st.excl_r = <int*>_alloc(nd * sizeof(int))
    st.parent = <int*>_alloc(nres * sizeof(int))
    st.q_off = <int*>_alloc((n + 1) * sizeof(int))
    st.q_r = <int*>_alloc(nq * sizeof(int))
    st.q_u = <double*>_alloc(nq * sizeof(double))
    st.q_a = <double*>_alloc(nq * sizeof(double))
    st.q_t = <double*>_alloc(nq * sizeof(double))
    st.q_w = <double*>_alloc(nq * sizeof(double))
    st.q_m = <double*>_alloc(nq * sizeof(double))
    st.admit = <int*>_alloc(n * sizeof(int))
    st.fillr = <int*>_alloc(n * sizeof(int))
    for i in range(n):
        st.admit[i], st.fillr[i] = ops[i].admit, ops[i].fills
    sems = sched.semaphores
    st.nsem = len(sems)
    st.sem_cap = <int*>_alloc(st.nsem * sizeof(int))
    for k in range(st.nsem):
        st.sem_cap[k] = sems[k].capacity
    st.acq_off = <int*>_alloc((n + 1) * sizeof(int))
    st.acq_s = <int*>_alloc(na * sizeof(int))
    st.acq_u = <int*>_alloc(na * sizeof(int))
    st.rel_off = <int*>_alloc((n + 1) * sizeof(int))
    st.rel_s = <int*>_alloc(nr * sizeof(int))
    st.rel_u = <int*>_alloc(nr * sizeof(int))
    na = nr = 0
    for i in range(n):
        st.acq_off[i], st.rel_off[i] = na, nr
        for ss, uu in ops[i].acquire:
            st.acq_s[na], st.acq_u[na] = ss, uu
            na += 1
        for ss, uu in ops[i].release:
            st.rel_s[nr], st.rel_u[nr] = ss, uu
            nr += 1
    st.acq_off[n], st.rel_off[n] = na, nr
    st.pol = <int*>_alloc(nres * sizeof(int))
    st.pol_thr = <double*>_alloc(nres * sizeof(double))
    st.pol_share = <double*>_alloc(nres * sizeof(double))
    st.pol_qb = <double*>_alloc(nres * sizeof(double))
    st.pol_serv = <double*>_alloc(nres * sizeof(double))
    st.policed = 0
    for r in range(nres):
        pd = pols[r]
        st.pol[r] = pd[0]
        st.pol_thr[r] = st.pol_share[r] = st.pol_qb[r] = st.pol_serv[r] = 0.0
        if pd[0] == 1:
            st.pol_thr[r], st.pol_share[r], st.pol_qb[r], st.pol_serv[r] = pd[1], pd[2], pd[3], pd[4]
            st.policed = 1
        elif pd[0] != 0:
            raise ValueError(f"resource {r}: a policy the compiled core does not know: {pd!r}")
    st.any_excl = 0
    st.any_mem = 0
    caps_l = []
    timings = []
    for r in range(nres):
        rs = res[r]
        caps_l.append(rs.capacity)
        st.cap[r] = rs.capacity
        st.parent[r] = rs.parent
        if rs.parent >= 0:
            st.any_excl = 1
        t = rs.timing
        timings.append(t)
        st.is_mem[r] = t is not None
        if t is not None:
            st.any_mem = 1
            st.turn[r], st.lat0[r], st.serv[r] = t.turnaround, t.latency_s, t.service_s
        else:
            st.turn[r] = st.lat0[r] = st.serv[r] = 0.0
    # the resource key (Allocator.__init__): capacities and memory timings, numbered process-wide; None
    # with a policy other than the default (no fillings shared across schedules, as in Python)
    if st.policed:
        st.rkey = None
    else:
        rt = tuple(zip(caps_l, timings, strict=True))
        rk = rkeys.get(rt)
        if rk is None:
            if len(rkeys) > 10_000:
                rkeys.clear()  # numbers go on: one held by a live allocator is never given again
            rk = rkeys[rt] = next(rkey_numbers)
        st.rkey = rk
    if len(sigs) > 1_000_000:
        sigs.clear()  # (as Allocator.__init__)
    sig = []
    # children: counts, offsets, then every op's id under each of its deps, in op order
    for i in range(n + 1):
        st.kid_off[i] = 0
    for op in ops:
        for d in op.deps:
            st.kid_off[<int>d + 1] += 1
    for i in range(n):
        st.kid_off[i + 1] += st.kid_off[i]
    cdef int *fill = <int*>_alloc(n * sizeof(int))
    try:
        for i in range(n):
            fill[i] = st.kid_off[i]
        firsts = []
        # per op: static maximum rate (t3.sim.engine._static), signature (Allocator.__init__) and the
        # demands, first-filling demands and memory parts (Allocator._prep)
        p = p1 = pm = pe = pq = 0
        for i in range(n):
            op = ops[i]
            st.q_off[i] = pq
            dd = dict(op.demands) if op.rounds else {}
            for rr, cc in op.caps:  # (Allocator.quant: a last wave's caps on a resource it demands)
                if rr in dd and dd[rr] > 0:
                    st.q_r[pq], st.q_u[pq], st.q_a[pq] = rr, cc, dd[rr]
                    st.q_t[pq], st.q_w[pq], st.q_m[pq] = op.rounds
                    pq += 1
            deps = op.deps
            st.indeg0[i] = len(deps)
            if not deps:
                firsts.append(i)
            for d in deps:
                st.kids[fill[<int>d]] = i
                fill[<int>d] += 1
            st.dem_off[i], st.dem1_off[i], st.mem_off[i] = p, p1, pm
            st.excl_off[i] = pe
            for rr, aa in op.demands:
                if st.parent[<int>rr] >= 0:
                    st.excl_r[pe] = rr
                    pe += 1
            st.prio[i] = op.prio
            st.window[i] = op.window
            st.delay[i] = op.delay_s
            dem = op.demands
            for rr, aa in dem:
                st.dem_r[p] = rr
                st.dem_a[p] = aa
                p += 1
            nd = p - st.dem_off[i]
            k = st.dem_off[i]
            lk = op.like
            if lk >= 0:  # a copy: the same demands, caps, priority, window and writes (Op.like)
                x = st.xmax[lk]
                sig.append(sig[lk])
            else:
                x = INF
                for q in range(k, p):
                    v = st.cap[st.dem_r[q]] / st.dem_a[q]
                    if v < x:
                        x = v
                for rr, cc in op.caps:
                    r = rr
                    # dict(dem)[r]: the last demand on r
                    for q in range(p - 1, k - 1, -1):
                        if st.dem_r[q] == r:
                            v = cc / st.dem_a[q]
                            if v < x:
                                x = v
                            break
                content = (op.prio, x, op.window, *dem, None, *op.writes)
                if op.rounds:
                    content += (None, *op.rounds, *op.caps)
                sg = sigs.get(content)
                if sg is None:
                    sg = sigs[content] = next(sig_numbers)
                sig.append(sg)
            st.xmax[i] = x
            dup = 0
            for q in range(k, p):
                for r in range(k, q):
                    if st.dem_r[r] == st.dem_r[q]:
                        dup = 1
            st.uniq[i] = not dup
            writes = op.writes
            c0 = x
            for q in range(k, p):
                r = st.dem_r[q]
                a = st.dem_a[q]
                st.xdem_a[q] = x * a
                closed = False
                if st.is_mem[r]:
                    w = 0.0  # dict(op.writes).get(r, 0.0): the last write on r
                    for rr, ww in writes:
                        if rr == r:
                            w = ww
                    closed = op.window > 0 and st.lat0[r] > 0 and a - w > 0
                    st.mem_r[pm], st.mem_a[pm], st.mem_w[pm], st.mem_closed[pm] = r, a, w, closed
                    pm += 1
                    if closed:
                        rd = a - w
                        v = op.window / (st.lat0[r] * rd)
                        if v < c0:
                            c0 = v
                if not closed:
                    st.dem1_r[p1], st.dem1_a[p1], st.xdem1_a[p1] = r, a, x * a
                    p1 += 1
            st.cap0[i] = c0
        st.dem_off[n], st.dem1_off[n], st.mem_off[n] = p, p1, pm
        st.q_off[n] = pq
        st.excl_off[n] = pe
    finally:
        free(fill)
    st.nfirst = len(firsts)
    st.first = <int*>_alloc(st.nfirst * sizeof(int))
    for k in range(st.nfirst):
        st.first[k] = firsts[k]
    st.sig = sig
    return st


cdef inline double _eta(double turn, double ws):
    # HbmTiming.eta: 1 / (1 + k * min(ws, 1 - ws))
    cdef double m = ws
    if 1.0 - ws < m:
        m = 1.0 - ws
    return 1.0 / (1.0 + turn * m)


cdef inline double _latency(double lat0, double serv, double rho):
    # HbmTiming.latency
    if rho >= 1.0:
        return INF
    return lat0 + serv * rho / (2.0 * (1.0 - rho))


cdef inline double _pymax(double a, double b):
    # Python's max(a, b): a unless b is larger
    return b if b > a else a


cdef inline double _pymin(double a, double b):
    # Python's min(a, b): a unless b is smaller
    return b if b < a else a


cdef double _available(Static st, int r, double capacity, double remaining, int level,
                       double lower) except? -1.0:
    """Policy.available of resource ``r``: the default policy's ``remaining``, or McaPolicy.available
    (with McaPolicy.admitted), the same arithmetic in the same order."""
    cdef double s, fl, x_g, rho_g, adm
    if st.pol[r] == 0:
        return remaining
    s = st.pol_share[r] * capacity
    if level == 0:  # the GEMM leaves the starvation share (or what communication asks, if less)
        return _pymax(0.0, remaining - _pymin(s, lower))
    fl = _pymin(remaining, s)
    x_g = capacity - remaining
    if x_g <= 0:
        return remaining
    rho_g = x_g / capacity  # McaPolicy.admitted(capacity, x_g)
    if rho_g >= 1:
        adm = x_g
    elif st.pol_serv[r] <= 0 or x_g * st.pol_serv[r] == 0.0:  # (an occupancy that underflows: inf)
        adm = INF
    else:
        adm = 2.0 * st.pol_thr[r] * (1.0 - rho_g) * st.pol_qb[r] / (x_g * st.pol_serv[r]) * capacity
    return _pymax(fl, _pymin(remaining, adm - x_g))


cdef double _pol_latency(Static st, int r, double capacity, int level, double tot, double g0) except? -1.0:
    """Policy.latency of memory ``r`` for requests of ``level`` when its levels move ``tot`` in all,
    ``g0`` of it level 0's: the default policy (everyone waits behind all) or McaPolicy.latency."""
    cdef double rho = tot / capacity, rho_g
    if st.pol[r] == 0:
        return _latency(st.lat0[r], st.serv[r], rho)
    rho_g = g0 / capacity
    if rho_g >= 1.0:
        return INF
    if level == 0:
        return st.lat0[r] + st.serv[r] * rho / (2.0 * (1.0 - rho_g))
    if rho >= 1.0:
        return INF
    return st.lat0[r] + st.serv[r] * rho / (2.0 * (1.0 - rho_g) * (1.0 - rho))


cdef class Run:
    """One run's state and scratch arrays."""

    cdef Static st
    cdef int n, nres
    cdef double *rate
    cdef double *remaining
    cdef double *start
    cdef double *end
    cdef int *indeg
    cdef int *active
    cdef int na
    cdef int *keep
    cdef int *done
    cdef double *heap_t
    cdef long long *heap_s
    cdef int *heap_i
    cdef int heap_n
    cdef int *work
    cdef int whead, wtail
    cdef double now
    # filling scratch (per resource / per op, with stamps instead of clearing)
    cdef double *capx
    cdef double *avail
    cdef int *avail_st
    cdef double *load
    cdef int *load_st
    cdef int *touched
    cdef int *sat_st
    cdef double *used
    cdef double *lim
    cdef int *lim_st
    cdef int *buf_a
    cdef int *buf_b
    cdef int *lvl_ops
    cdef int stamp
    # allocation scratch
    cdef double *capm
    cdef double *eta
    cdef double *ask_t
    cdef double *ask_w
    cdef int *ask_st
    cdef int *ask_order
    cdef double *f0
    cdef double *f1
    cdef double *blv  # per resource: MAX_LEVELS (level, flow) pairs in insertion order
    cdef int *blk
    cdef int *bln
    cdef int *on_mem
    cdef int *grp_ops
    cdef int *grp_off
    cdef int *parent
    cdef int *par_st
    cdef int *root_g
    cdef int *root_st
    cdef int *gid
    cdef dict amemo
    cdef dict memo
    cdef dict fills
    cdef list sig
    # exclusive partitions (Engine.run): ops in progress on each, what they hold, the capacities less it
    cdef int *inuse
    cdef double *reserved
    cdef double *capc
    # block dispatch (Engine.run's filling / admitq): per CU pool the ops in progress filling it and a
    # FIFO of the kernels waiting for it (head, tail, next), per op whether it was admitted, since when
    # it waits; the waits and their total time
    cdef int *filling
    cdef int *aq_head
    cdef int *aq_tail
    cdef int *aq_next
    cdef char *admitted
    cdef double *aq_since
    cdef int aq_n
    cdef long disp_waits
    cdef double disp_wait_s
    cdef bint held_changed
    cdef object hkey
    # semaphores (Engine.run's held, peak, waits, wait_s, queues, since, granted): units held, their
    # peak, the ops that waited and their total wait per semaphore; per semaphore a FIFO of waiting ops
    # (head, tail; next per op), per op since when it waits and whether its units were granted
    cdef int *held
    cdef int *peak
    cdef long *swaits
    cdef double *swait_s
    cdef int *sq_head
    cdef int *sq_tail
    cdef int *sq_next
    cdef double *since
    cdef char *granted
    # the filling's demand of the lower priority levels per resource (Allocator._fill's ``lower``)
    cdef double *lower
    # seeded order and jitter (Engine.rng, Engine.jitter), trace (usage snapshots through the Python
    # engine's _snapshot, semaphore levels): None / 0 when not asked
    cdef object rng
    cdef double jitter
    cdef list usage
    cdef object snapshot
    cdef object ops
    cdef object res
    cdef list levels

    def __cinit__(self, Static st, dict fills, rng=None, double jitter=0.0, trace=None):
        cdef int n = st.n, nres = st.nres
        self.st = st
        self.rng, self.jitter = rng, jitter
        self.usage = self.levels = None
        if trace is not None:  # (sched, snapshot): the usage of every step, the semaphore levels
            sched, self.snapshot = trace
            self.ops, self.res = sched.ops, sched.resources
            self.usage = []
            self.levels = [[] for _ in range(st.nsem)]
        self.n, self.nres = n, nres
        self.rate = <double*>_alloc(n * sizeof(double))
        self.remaining = <double*>_alloc(n * sizeof(double))
        self.start = <double*>_alloc(n * sizeof(double))
        self.end = <double*>_alloc(n * sizeof(double))
        self.indeg = <int*>_alloc(n * sizeof(int))
        self.active = <int*>_alloc(n * sizeof(int))
        self.keep = <int*>_alloc(n * sizeof(int))
        self.done = <int*>_alloc(n * sizeof(int))
        self.heap_t = <double*>_alloc(n * sizeof(double))
        self.heap_s = <long long*>_alloc(n * sizeof(long long))
        self.heap_i = <int*>_alloc(n * sizeof(int))
        # begin (once more after waiting for CUs, once more after waiting for a semaphore), enter, finish
        self.work = <int*>_alloc((5 * n + 1) * sizeof(int))
        self.capx = <double*>_alloc(n * sizeof(double))
        self.avail = <double*>_alloc(nres * sizeof(double))
        self.avail_st = <int*>_alloc(nres * sizeof(int))
        self.load = <double*>_alloc(nres * sizeof(double))
        self.load_st = <int*>_alloc(nres * sizeof(int))
        self.touched = <int*>_alloc(nres * sizeof(int))
        self.sat_st = <int*>_alloc(nres * sizeof(int))
        self.used = <double*>_alloc(nres * sizeof(double))
        self.lim = <double*>_alloc(n * sizeof(double))
        self.lim_st = <int*>_alloc(n * sizeof(int))
        self.buf_a = <int*>_alloc(n * sizeof(int))
        self.buf_b = <int*>_alloc(n * sizeof(int))
        self.lvl_ops = <int*>_alloc(n * sizeof(int))
        self.capm = <double*>_alloc(nres * sizeof(double))
        self.eta = <double*>_alloc(nres * sizeof(double))
        self.ask_t = <double*>_alloc(nres * sizeof(double))
        self.ask_w = <double*>_alloc(nres * sizeof(double))
        self.ask_st = <int*>_alloc(nres * sizeof(int))
        self.ask_order = <int*>_alloc(nres * sizeof(int))
        self.f0 = <double*>_alloc(nres * sizeof(double))
        self.f1 = <double*>_alloc(nres * sizeof(double))
        self.blv = <double*>_alloc(nres * MAX_LEVELS * sizeof(double))
        self.blk = <int*>_alloc(nres * MAX_LEVELS * sizeof(int))
        self.bln = <int*>_alloc(nres * sizeof(int))
        self.on_mem = <int*>_alloc(n * sizeof(int))
        self.grp_ops = <int*>_alloc(n * sizeof(int))
        self.grp_off = <int*>_alloc((n + 1) * sizeof(int))
        self.parent = <int*>_alloc(nres * sizeof(int))
        self.par_st = <int*>_alloc(nres * sizeof(int))
        self.root_g = <int*>_alloc(nres * sizeof(int))
        self.root_st = <int*>_alloc(nres * sizeof(int))
        self.gid = <int*>_alloc(n * sizeof(int))
        self.inuse = <int*>_alloc(nres * sizeof(int))
        self.reserved = <double*>_alloc(nres * sizeof(double))
        self.capc = <double*>_alloc(nres * sizeof(double))
        self.filling = <int*>_alloc(nres * sizeof(int))
        self.aq_head = <int*>_alloc(nres * sizeof(int))
        self.aq_tail = <int*>_alloc(nres * sizeof(int))
        self.aq_next = <int*>_alloc(n * sizeof(int))
        self.admitted = <char*>_alloc(n * sizeof(char))
        self.aq_since = <double*>_alloc(n * sizeof(double))
        cdef int ns = st.nsem
        self.held = <int*>_alloc(ns * sizeof(int))
        self.peak = <int*>_alloc(ns * sizeof(int))
        self.swaits = <long*>_alloc(ns * sizeof(long))
        self.swait_s = <double*>_alloc(ns * sizeof(double))
        self.sq_head = <int*>_alloc(ns * sizeof(int))
        self.sq_tail = <int*>_alloc(ns * sizeof(int))
        self.sq_next = <int*>_alloc(n * sizeof(int))
        self.since = <double*>_alloc(n * sizeof(double))
        self.granted = <char*>_alloc(n * sizeof(char))
        self.lower = <double*>_alloc(nres * sizeof(double))
        cdef int i
        for i in range(nres):
            self.avail_st[i] = self.load_st[i] = self.sat_st[i] = self.ask_st[i] = 0
            self.par_st[i] = self.root_st[i] = 0
            self.inuse[i] = 0
            self.reserved[i] = 0.0
            self.capc[i] = st.cap[i]
        self.held_changed = False
        self.hkey = None
        for i in range(n):
            self.lim_st[i] = 0
        self.stamp = 0
        self.amemo = {}
        self.memo = {}
        self.fills = fills
        self.sig = st.sig

    def __dealloc__(self):
        cdef void* ps[53]
        ps[:] = [self.rate, self.remaining, self.start, self.end, self.indeg, self.active, self.keep,
                 self.done, self.heap_t, self.heap_s, self.heap_i, self.work, self.capx, self.avail,
                 self.avail_st, self.load, self.load_st, self.touched, self.sat_st, self.used, self.lim,
                 self.lim_st, self.buf_a, self.buf_b, self.lvl_ops, self.capm, self.eta, self.ask_t,
                 self.ask_w, self.ask_st, self.ask_order, self.f0, self.f1, self.blv, self.blk, self.bln,
                 self.on_mem, self.grp_ops, self.grp_off, self.parent, self.par_st, self.root_g,
                 self.root_st, self.gid, self.inuse, self.reserved, self.capc, self.filling, self.aq_head,
                 self.aq_tail, self.aq_next, self.admitted, self.aq_since]
        for p in ps:
            free(p)
        cdef void* qs[10]
        qs[:] = [self.held, self.peak, self.swaits, self.swait_s, self.sq_head, self.sq_tail, self.sq_next,
                 self.since, self.granted, self.lower]
        for p in qs:
            free(p)

    # ---- the heap of delays: (time, sequence number, op), as heapq orders the tuples -------------
    cdef inline bint _less(self, int a, int b):
        return self.heap_t[a] < self.heap_t[b] or (self.heap_t[a] == self.heap_t[b] and self.heap_s[a] < self.heap_s[b])

    cdef inline void _swap(self, int a, int b):
        cdef double t = self.heap_t[a]
        cdef long long s = self.heap_s[a]
        cdef int i = self.heap_i[a]
        self.heap_t[a], self.heap_s[a], self.heap_i[a] = self.heap_t[b], self.heap_s[b], self.heap_i[b]
        self.heap_t[b], self.heap_s[b], self.heap_i[b] = t, s, i

    cdef void _hpush(self, double t, long long s, int i):
        cdef int k = self.heap_n, up
        self.heap_n += 1
        self.heap_t[k], self.heap_s[k], self.heap_i[k] = t, s, i
        while k > 0:
            up = (k - 1) >> 1
            if self._less(k, up):
                self._swap(k, up)
                k = up
            else:
                break

    cdef int _hpop(self):
        cdef int top = self.heap_i[0], k = 0, l, r, m
        self.heap_n -= 1
        if self.heap_n > 0:
            self.heap_t[0], self.heap_s[0], self.heap_i[0] = (
                self.heap_t[self.heap_n], self.heap_s[self.heap_n], self.heap_i[self.heap_n]
            )
            while True:
                l = 2 * k + 1
                if l >= self.heap_n:
                    break
                r = l + 1
                m = l
                if r < self.heap_n and self._less(r, l):
                    m = r
                if self._less(m, k):
                    self._swap(m, k)
                    k = m
                else:
                    break
        return top

    # ---- work items: (op << 2) | what, what: 0 = begin, 1 = enter (delay over), 2 = finish --------
    cdef bint _process(self, long long *seq):
        cdef Static st = self.st
        cdef bint changed = False, wait
        cdef int w, i, what, k, c, p, s0
        cdef double d
        while True:
            while self.whead < self.wtail:
                w = self.work[self.whead]
                self.whead += 1
                i = w >> 2
                what = w & 3
                if what == 0:
                    p = st.admit[i]
                    if p >= 0 and not self.admitted[i]:
                        if self.filling[p] or self.aq_head[p] >= 0:
                            self.aq_next[i] = -1
                            if self.aq_head[p] < 0:
                                self.aq_head[p] = i
                            else:
                                self.aq_next[self.aq_tail[p]] = i
                            self.aq_tail[p] = i
                            self.aq_n += 1
                            self.aq_since[i] = self.now
                            self.disp_waits += 1
                            continue
                        self.admitted[i] = 1
                    if st.acq_off[i + 1] > st.acq_off[i] and not self.granted[i]:
                        # units first come, first served: wait behind any waiting op or for free units
                        s0 = st.acq_s[st.acq_off[i]]
                        wait = not self._fits(i)
                        for k in range(st.acq_off[i], st.acq_off[i + 1]):
                            if self.sq_head[st.acq_s[k]] >= 0:
                                wait = True
                        if wait:
                            self.sq_next[i] = -1
                            if self.sq_head[s0] < 0:
                                self.sq_head[s0] = i
                            else:
                                self.sq_next[self.sq_tail[s0]] = i
                            self.sq_tail[s0] = i
                            self.since[i] = self.now
                            self.swaits[s0] += 1
                            continue
                        self._take(i)
                    self.start[i] = self.now
                    if st.fillr[i] >= 0:
                        self.filling[st.fillr[i]] += 1
                    for k in range(st.excl_off[i], st.excl_off[i + 1]):
                        c = st.excl_r[k]
                        self.inuse[c] += 1
                        if self.inuse[c] == 1:
                            self.reserved[st.parent[c]] += st.cap[c]
                            self.held_changed = changed = True
                    d = st.delay[i]
                    if d > 0:
                        if self.jitter:
                            d *= 1.0 + self.jitter * self.rng.random() if self.rng is not None else 1.0 + self.jitter
                        self._hpush(self.now + d, seq[0], i)
                        seq[0] += 1
                    else:
                        self.work[self.wtail] = w | 1
                        self.wtail += 1
                elif what == 1:
                    if st.dem_off[i + 1] > st.dem_off[i]:
                        self.active[self.na] = i
                        self.na += 1
                        changed = True
                    else:
                        self.work[self.wtail] = w | 2
                        self.wtail += 1
                else:
                    self.end[i] = self.now
                    if st.fillr[i] >= 0:
                        self.filling[st.fillr[i]] -= 1
                    for k in range(st.excl_off[i], st.excl_off[i + 1]):
                        c = st.excl_r[k]
                        self.inuse[c] -= 1
                        if self.inuse[c] == 0:
                            self.reserved[st.parent[c]] -= st.cap[c]
                            self.held_changed = changed = True
                    if st.rel_off[i + 1] > st.rel_off[i]:
                        for k in range(st.rel_off[i], st.rel_off[i + 1]):
                            self.held[st.rel_s[k]] -= st.rel_u[k]
                            if self.levels is not None:
                                self.levels[st.rel_s[k]].append((self.now, self.held[st.rel_s[k]]))
                        self._drain()
                    if self.rng is not None:
                        new = []
                        for k in range(st.kid_off[i], st.kid_off[i + 1]):
                            c = st.kids[k]
                            self.indeg[c] -= 1
                            if self.indeg[c] == 0:
                                new.append(c << 2)
                        self.rng.shuffle(new)
                        for c in new:
                            self.work[self.wtail] = c
                            self.wtail += 1
                        continue
                    for k in range(st.kid_off[i], st.kid_off[i + 1]):
                        c = st.kids[k]
                        self.indeg[c] -= 1
                        if self.indeg[c] == 0:
                            self.work[self.wtail] = c << 2
                            self.wtail += 1
            if not (self.aq_n and self._admit_next()):
                return changed
            changed = True

    cdef inline bint _fits(self, int i):
        # Engine.run's fits: every unit the op asks is free (or nothing of that semaphore is held)
        cdef Static st = self.st
        cdef int k, s
        for k in range(st.acq_off[i], st.acq_off[i + 1]):
            s = st.acq_s[k]
            if not (self.held[s] == 0 or self.held[s] + st.acq_u[k] <= st.sem_cap[s]):
                return False
        return True

    cdef inline void _take(self, int i):
        # Engine.run's take
        cdef Static st = self.st
        cdef int k, s
        self.granted[i] = 1
        for k in range(st.acq_off[i], st.acq_off[i + 1]):
            s = st.acq_s[k]
            self.held[s] += st.acq_u[k]
            if self.held[s] > self.peak[s]:
                self.peak[s] = self.held[s]
            if self.levels is not None:
                self.levels[s].append((self.now, self.held[s]))

    cdef void _drain(self):
        # Engine.run's drain: each semaphore's waiting ops in order while the first one's units are free
        cdef Static st = self.st
        cdef int s, i
        for s in range(st.nsem):
            while self.sq_head[s] >= 0 and self._fits(self.sq_head[s]):
                i = self.sq_head[s]
                self.sq_head[s] = self.sq_next[i]
                self.swait_s[st.acq_s[st.acq_off[i]]] += self.now - self.since[i]
                self._take(i)
                self.work[self.wtail] = i << 2
                self.wtail += 1

    cdef bint _admit_next(self):
        # Engine.run's admit_next: the first waiting kernel of the first pool (by index) nothing fills
        cdef int p, i
        for p in range(self.nres):
            i = self.aq_head[p]
            if i >= 0 and not self.filling[p]:
                self.aq_head[p] = self.aq_next[i]
                self.aq_n -= 1
                self.admitted[i] = 1
                self.disp_wait_s += self.now - self.aq_since[i]
                self.work[self.wtail] = i << 2
                self.wtail += 1
                return True
        return False

    # ---- filling (Allocator._fill, default policies) ---------------------------------------------
    cdef void _fill(self, int *act, int na, double *cap, bint first_fill) except *:
        cdef Static st = self.st
        cdef int *off = st.dem1_off if first_fill else st.dem_off
        cdef int *dr = st.dem1_r if first_fill else st.dem_r
        cdef double *da = st.dem1_a if first_fill else st.dem_a
        cdef double *xa_ = st.xdem1_a if first_fill else st.xdem_a
        cdef double *xmax = st.xmax
        cdef double *capx = self.capx
        cdef double *rate = self.rate
        cdef int i, k, r, q, lv, nl, g, nu, nn, ntouch, li, gi
        cdef double x, c, step, s, t, av, xa, left, ld
        cdef bint frozen, single, issat
        cdef int levels[16]
        cdef int lcount[16]
        cdef int lstart[16]
        if na == 1 and st.uniq[act[0]]:
            i = act[0]
            x = xmax[i]
            c = capx[i]
            step = 1.0
            if c < x:
                s = c / x
                if s < step:
                    step = s
            for k in range(off[i], off[i + 1]):
                r = dr[k]
                av = cap[r] - 0.0
                if st.pol[r]:
                    av = _available(st, r, cap[r], av, st.prio[i], 0.0)
                s = av / xa_[k]
                if s < step:
                    step = s
            if step < 0:
                step = 0.0
            t = 0.0 + step
            x *= t
            frozen = t >= 1.0 - 1e-12 or x >= c * (1 - 1e-12)
            if not frozen:
                for k in range(off[i], off[i + 1]):
                    r = dr[k]
                    av = cap[r] - 0.0
                    if st.pol[r]:
                        av = _available(st, r, cap[r], av, st.prio[i], 0.0)
                    if av - step * xa_[k] <= 1e-12 * cap[r]:
                        frozen = True
                        break
            if frozen:
                rate[i] = c if x > c else x
                return
        # the priority levels of the active ops, in order of appearance, then sorted
        nl = 0
        for k in range(na):
            lv = st.prio[act[k]]
            for q in range(nl):
                if levels[q] == lv:
                    break
            else:
                levels[nl] = lv
                nl += 1
        single = nl == 1
        if not single:
            # sorted(groups): insertion sort of the (few) levels
            for q in range(1, nl):
                lv = levels[q]
                g = q - 1
                while g >= 0 and levels[g] > lv:
                    levels[g + 1] = levels[g]
                    g -= 1
                levels[g + 1] = lv
            # each level's ops, in the order of ``act``
            nn = 0
            for q in range(nl):
                lstart[q] = nn
                for k in range(na):
                    if st.prio[act[k]] == levels[q]:
                        self.lvl_ops[nn] = act[k]
                        nn += 1
                lcount[q] = nn - lstart[q]
        # used: every resource starts at 0.0 (``used.get(r, 0.0)``); with a policy, what the levels below
        # the first ask at their maximum rates (``lower``)
        for r in range(self.nres):
            self.used[r] = 0.0
        if st.policed:
            for r in range(self.nres):
                self.lower[r] = 0.0
            if not single:
                for k in range(na):
                    i = act[k]
                    if st.prio[i] != levels[0]:
                        for li in range(off[i], off[i + 1]):
                            self.lower[dr[li]] += xa_[li]
        cdef int *group
        cdef int ng
        cdef int *unf
        cdef int *nxt
        cdef int *tmp
        for q in range(nl):
            if single:
                group, ng = act, na
            else:
                group, ng = self.lvl_ops + lstart[q], lcount[q]
            if st.policed and q != 0:  # this level no longer counts as lower
                for k in range(ng):
                    i = group[k]
                    for li in range(off[i], off[i + 1]):
                        self.lower[dr[li]] -= xa_[li]
            self.stamp += 1
            gi = self.stamp  # avail and lim markers of this level
            for k in range(ng):
                i = group[k]
                c = capx[i]
                x = xmax[i]
                if c < x:
                    self.lim[i] = c / x
                    self.lim_st[i] = gi
                for li in range(off[i], off[i + 1]):
                    r = dr[li]
                    if self.avail_st[r] != gi:
                        self.avail_st[r] = gi
                        if st.pol[r] == 0:
                            self.avail[r] = cap[r] - self.used[r]
                        else:
                            ld = self.lower[r]
                            self.avail[r] = _available(st, r, cap[r], cap[r] - self.used[r], levels[q],
                                                       ld if ld > 1e-12 * cap[r] else 0.0)
            t = 0.0
            unf = group
            nu = ng
            nxt = self.buf_a
            while nu:
                self.stamp += 1
                g = self.stamp  # load and saturation markers of this round
                ntouch = 0
                step = 1.0 - t
                for k in range(nu):
                    i = unf[k]
                    if self.lim_st[i] == gi:
                        s = self.lim[i] - t
                        if s < step:
                            step = s
                    for li in range(off[i], off[i + 1]):
                        r = dr[li]
                        xa = xa_[li]
                        if self.load_st[r] == g:
                            self.load[r] += xa
                        else:
                            self.load_st[r] = g
                            self.load[r] = xa
                            self.touched[ntouch] = r
                            ntouch += 1
                for k in range(ntouch):
                    r = self.touched[k]
                    s = self.avail[r] / self.load[r]
                    if s < step:
                        step = s
                if step < 0:
                    step = 0.0
                t += step
                issat = False
                for k in range(ntouch):
                    r = self.touched[k]
                    ld = self.load[r]
                    left = self.avail[r] - step * ld
                    self.avail[r] = left
                    if left <= 1e-12 * cap[r]:
                        self.sat_st[r] = g
                        issat = True
                nn = 0
                if t >= 1.0 - 1e-12:
                    for k in range(nu):
                        i = unf[k]
                        x = xmax[i] * t
                        c = capx[i]
                        rate[i] = c if x > c else x
                else:
                    for k in range(nu):
                        i = unf[k]
                        x = xmax[i] * t
                        c = capx[i]
                        frozen = x >= c * (1 - 1e-12)
                        if not frozen and issat:
                            for li in range(off[i], off[i + 1]):
                                if self.sat_st[dr[li]] == g:
                                    frozen = True
                                    break
                        if frozen:
                            rate[i] = c if x > c else x
                        else:
                            nxt[nn] = i
                            nn += 1
                unf = nxt
                nu = nn
                nxt = self.buf_b if unf == self.buf_a else self.buf_a
            if q != nl - 1:
                for k in range(ng):
                    i = group[k]
                    x = rate[i]
                    for li in range(off[i], off[i + 1]):
                        r = dr[li]
                        self.used[r] = self.used[r] + x * da[li]

    # ---- one allocation (Allocator._allocate, default policies) ----------------------------------
    cdef void _allocate(self, int *act, int na) except *:
        cdef Static st = self.st
        cdef double *capx = self.capx
        cdef double *rate = self.rate
        cdef int i, k, m, r, nm, nask, q, lv, j, idx
        cdef double c, tot, wtot, x, a, w, e, flow, wflow, lat, s, u
        cdef bint again, over, ok
        for k in range(na):
            i = act[k]
            capx[i] = st.cap0[i]
        if self.hkey is not None:  # CUs held: a GEMM's last wave ends in whole rounds (rounds_cap), a
            # clustered GEMM's waves lose whole cluster slots (cluster_cus)
            for k in range(na):
                i = act[k]
                for q in range(st.q_off[i], st.q_off[i + 1]):
                    r = st.q_r[q]
                    c = self.capc[r]
                    u = st.q_u[q]
                    if c < st.cap[r]:
                        if st.q_m[q] > 1.0:  # cluster_cus(c, full, m) (t3.sim.engine.cluster_cus)
                            w = st.cap[r] - st.q_m[q] * (st.cap[r] - c)
                            c = st.q_m[q] * floor(w / st.q_m[q] + 1e-9) if w > 0.0 else 0.0
                        if st.q_t[q] > 0.0:
                            # rounds_cap(u, c, tiles, width) / a (t3.sim.engine.rounds_cap)
                            if st.q_w[q] < c:
                                c = st.q_w[q]
                            if c > 0.0:
                                x = u / (ceil(st.q_t[q] / c - 1e-9) - (st.q_t[q] - u) / c) / st.q_a[q]
                            else:
                                x = 0.0
                        else:  # a fluid wave: at most the CUs left
                            x = (u if u < c else c) / st.q_a[q]
                        if x < capx[i]:
                            capx[i] = x
        nm = 0
        if st.any_mem:
            for k in range(na):
                i = act[k]
                if st.mem_off[i + 1] > st.mem_off[i]:
                    self.on_mem[nm] = act[k]
                    nm += 1
        if nm == 0:
            self._fill(act, na, self.capc, False)
            return
        cdef double *cap = self.capm
        for r in range(self.nres):
            cap[r] = self.capc[r]
        # the turnaround of the first filling: the write share of what the ops ask at their caps
        self.stamp += 1
        cdef int sa = self.stamp
        nask = 0
        for k in range(nm):
            i = self.on_mem[k]
            c = capx[i]
            for m in range(st.mem_off[i], st.mem_off[i + 1]):
                r = st.mem_r[m]
                if self.ask_st[r] != sa:
                    self.ask_st[r] = sa
                    self.ask_t[r] = 0.0
                    self.ask_w[r] = 0.0
                    self.ask_order[nask] = r
                    nask += 1
                self.ask_t[r] += c * st.mem_a[m]
                self.ask_w[r] += c * st.mem_w[m]
        for k in range(nask):
            r = self.ask_order[k]
            tot, wtot = self.ask_t[r], self.ask_w[r]
            self.eta[r] = _eta(st.turn[r], wtot / tot) if tot > 0 else 1.0
            cap[r] = self.capc[r] * self.eta[r]
        self._fill(act, na, cap, True)
        # the first filling's flows per memory resource: total, writes, by level (insertion order)
        for k in range(nask):
            r = self.ask_order[k]
            self.f0[r] = 0.0
            self.f1[r] = 0.0
            self.bln[r] = 0
        for k in range(nm):
            i = self.on_mem[k]
            x = rate[i]
            lv = st.prio[i]
            for m in range(st.mem_off[i], st.mem_off[i + 1]):
                r = st.mem_r[m]
                a = st.mem_a[m]
                w = st.mem_w[m]
                self.f0[r] += x * a
                self.f1[r] += x * w
                idx = r * MAX_LEVELS
                for j in range(self.bln[r]):
                    if self.blk[idx + j] == lv:
                        self.blv[idx + j] = self.blv[idx + j] + x * a
                        break
                else:
                    j = self.bln[r]
                    self.blk[idx + j] = lv
                    self.blv[idx + j] = 0.0 + x * a
                    self.bln[r] = j + 1
        # sorted(flows): the memory resources in increasing order
        for q in range(1, nask):
            r = self.ask_order[q]
            j = q - 1
            while j >= 0 and self.ask_order[j] > r:
                self.ask_order[j + 1] = self.ask_order[j]
                j -= 1
            self.ask_order[j + 1] = r
        again = False
        cdef int nlv
        cdef int lvs[16]
        for k in range(nask):
            r = self.ask_order[k]
            flow, wflow = self.f0[r], self.f1[r]
            if flow <= 0:
                continue
            e = _eta(st.turn[r], wflow / flow)
            if abs(e - self.eta[r]) > 1e-3 * self.eta[r]:
                self.eta[r] = e
                cap[r] = self.capc[r] * e
                again = True
            # the levels with closed streams on r, sorted
            nlv = 0
            for q in range(nm):
                i = self.on_mem[q]
                for m in range(st.mem_off[i], st.mem_off[i + 1]):
                    if st.mem_r[m] == r and st.mem_closed[m]:
                        lv = st.prio[i]
                        for j in range(nlv):
                            if lvs[j] == lv:
                                break
                        else:
                            lvs[nlv] = lv
                            nlv += 1
            if nlv == 0:
                continue
            for q in range(1, nlv):
                lv = lvs[q]
                j = q - 1
                while j >= 0 and lvs[j] > lv:
                    lvs[j + 1] = lvs[j]
                    j -= 1
                lvs[j + 1] = lv
            over = flow > cap[r] * (1 + 1e-9)
            for j in range(nlv):
                lv = lvs[j]
                # Policy.latency(timing, cap, lv, by_level): sum(flows.values()), flows.get(0, 0.0)
                s = 0.0
                u = 0.0
                idx = r * MAX_LEVELS
                for q in range(self.bln[r]):
                    s = s + self.blv[idx + q]
                    if self.blk[idx + q] == 0:
                        u = self.blv[idx + q]
                lat = _pol_latency(st, r, cap[r], lv, s, u)
                if not over:
                    ok = True
                    for q in range(nm):
                        i = self.on_mem[q]
                        if st.prio[i] != lv:
                            continue
                        for m in range(st.mem_off[i], st.mem_off[i + 1]):
                            if st.mem_r[m] == r and st.mem_closed[m]:
                                if not (rate[i] * (st.mem_a[m] - st.mem_w[m]) <= st.window[i] / lat * (1 + 1e-6)):
                                    ok = False
                                    break
                        if not ok:
                            break
                    if ok:
                        continue
                lat = self._solve(r, lv, cap[r], nm)
                for q in range(nm):
                    i = self.on_mem[q]
                    if st.prio[i] != lv:
                        continue
                    for m in range(st.mem_off[i], st.mem_off[i + 1]):
                        if st.mem_r[m] == r and st.mem_closed[m]:
                            c = st.window[i] / (lat * (st.mem_a[m] - st.mem_w[m]))
                            if c < capx[i]:
                                capx[i] = c
                again = True
        if again:
            self._fill(act, na, cap, False)

    cdef double _solve(self, int r, int lv, double cap, int nm) except? -1.0:
        """Allocator._solve (default policy): the latency at which the closed streams of level ``lv``
        on memory ``r`` read what their windows allow; memoised under the Python engine's key."""
        cdef Static st = self.st
        cdef int q, m, i, idx, j, nb, pos = -1
        cdef double base, a, rd, lat, lo, hi, hlo, hhi, x, hx, tot
        cdef int side, it
        dem = []
        base = 0.0
        idx = r * MAX_LEVELS
        nb = self.bln[r]
        for j in range(nb):
            if self.blk[idx + j] == lv:
                base = self.blv[idx + j]
                pos = j
        tot = 0.0  # sum(rate[i] * a for i, a, _ in group), from int 0 as sum() starts
        cdef list ws = []
        cdef list ds = []
        cdef list ks = []
        for q in range(nm):
            i = self.on_mem[q]
            if st.prio[i] != lv:
                continue
            for m in range(st.mem_off[i], st.mem_off[i + 1]):
                if st.mem_r[m] == r and st.mem_closed[m]:
                    a = st.mem_a[m]
                    rd = a - st.mem_w[m]
                    dem.append((st.window[i], self.rate[i] * rd, a / rd))
                    tot = tot + self.rate[i] * a
        base = base - tot
        levels = tuple(sorted([(self.blk[idx + j], self.blv[idx + j]) for j in range(nb)]))
        key = (r, lv, tuple(dem), base, cap, levels)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        cdef int nd = len(dem)
        cdef double *W = <double*>_alloc(nd * sizeof(double))
        cdef double *D = <double*>_alloc(nd * sizeof(double))
        cdef double *K = <double*>_alloc(nd * sizeof(double))
        cdef double *F = <double*>_alloc(nb * sizeof(double))
        try:
            for j in range(nd):
                W[j], D[j], K[j] = dem[j]
            for j in range(nb):
                F[j] = self.blv[idx + j]
            lo = st.lat0[r]
            hlo = self._h(lo, W, D, K, nd, F, nb, pos, base, cap, r)
            if hlo <= 0:
                lat = lo
            else:
                hi = 2.0 * lo
                hhi = self._h(hi, W, D, K, nd, F, nb, pos, base, cap, r)
                for it in range(200):
                    if hhi < 0:
                        break
                    lo, hlo = hi, hhi
                    hi *= 2.0
                    hhi = self._h(hi, W, D, K, nd, F, nb, pos, base, cap, r)
                if hhi == INF or hhi >= 0:
                    lat = hi
                else:
                    side = 0
                    for it in range(100):
                        if hhi != hlo and hlo != INF:
                            x = (lo * hhi - hi * hlo) / (hhi - hlo)
                        else:
                            x = 0.5 * (lo + hi)
                        if not (lo < x < hi):
                            x = 0.5 * (lo + hi)
                        hx = self._h(x, W, D, K, nd, F, nb, pos, base, cap, r)
                        if hx > 0:
                            lo, hlo = x, hx
                            if side == 1:
                                hhi *= 0.5
                            side = 1
                        else:
                            hi, hhi = x, hx
                            if side == -1:
                                hlo *= 0.5
                            side = -1
                        if hi - lo <= 1e-12 * hi:
                            break
                    lat = hi
        finally:
            free(W)
            free(D)
            free(K)
            free(F)
        if len(self.memo) > 100_000:
            self.memo.clear()
        self.memo[key] = lat
        return lat

    cdef double _h(self, double lat, double *W, double *D, double *K, int nd, double *F, int nb, int pos,
                   double base, double cap, int r):
        # flows[lv] = base + sum(min(d, w / lat) * k ...); policy latency(flows) - lat
        cdef double s = 0.0, v, tot = 0.0, g0 = 0.0
        cdef int j, idx = r * MAX_LEVELS
        for j in range(nd):
            v = W[j] / lat
            s = s + (v if v < D[j] else D[j]) * K[j]
        for j in range(nb):
            v = (base + s) if j == pos else F[j]
            tot = tot + v
            if self.blk[idx + j] == 0:
                g0 = v
        return _pol_latency(self.st, r, cap, self.blk[idx + pos], tot, g0) - lat

    # ---- one event (Allocator.allocate, _groups, _allocate_memo) ----------------------------------
    cdef void _allocate_all(self) except *:
        cdef Static st = self.st
        cdef int na = self.na, k, i, li, r, r0, g, ng, p
        cdef int *act = self.active
        if na >= SPLIT_MIN:
            self.stamp += 1
            p = self.stamp
            # union-find over the resources the active ops name
            for k in range(na):
                i = act[k]
                r0 = st.dem_r[st.dem_off[i]]
                if self.par_st[r0] != p:
                    self.par_st[r0] = p
                    self.parent[r0] = r0
                while self.parent[r0] != r0:
                    r0 = self.parent[r0]
                for li in range(st.dem_off[i] + 1, st.dem_off[i + 1]):
                    r = st.dem_r[li]
                    if self.par_st[r] != p:
                        self.par_st[r] = p
                        self.parent[r] = r
                    while self.parent[r] != r:
                        r = self.parent[r]
                    if r != r0:
                        self.parent[r] = r0
            # groups, in the order of their first op in ``act``; ops in the order of ``act``
            ng = 0
            for k in range(na):
                r = st.dem_r[st.dem_off[act[k]]]
                while self.parent[r] != r:
                    r = self.parent[r]
                if self.root_st[r] != p:
                    self.root_st[r] = p
                    self.root_g[r] = ng
                    self.grp_off[ng] = 0
                    ng += 1
                self.gid[k] = self.root_g[r]
                self.grp_off[self.root_g[r]] += 1
            if ng > 1:
                # counts -> offsets, then place the ops
                r = 0
                for g in range(ng):
                    k = self.grp_off[g]
                    self.grp_off[g] = r
                    r += k
                self.grp_off[ng] = r
                for k in range(na):
                    g = self.gid[k]
                    self.grp_ops[self.grp_off[g]] = act[k]
                    self.grp_off[g] += 1
                # (offsets moved to each group's end: recover the starts)
                for g in range(ng - 1, 0, -1):
                    self.grp_off[g] = self.grp_off[g - 1]
                self.grp_off[0] = 0
                for g in range(ng):
                    self._allocate_memo(self.grp_ops + self.grp_off[g], self.grp_off[g + 1] - self.grp_off[g])
                return
        self._allocate_memo(act, na)

    cdef void _allocate_memo(self, int *act, int na) except *:
        cdef list sig = self.sig
        cdef int k, i
        if na == 1:
            key = sig[act[0]]
        elif na == 2:
            a, b = sig[act[0]], sig[act[1]]
            key = (a, b) if a <= b else (b, a)
        else:
            key = tuple(sorted([sig[act[k]] for k in range(na)]))
        hk = self.hkey
        if hk is not None:
            key = (key, hk)
        hit = self.amemo.get(key)
        if hit is not None:
            for k in range(na):
                i = act[k]
                self.rate[i] = hit[sig[i]]
            return
        if self.st.rkey is None:  # a policy other than the default: filled here, not shared (as in Python)
            self._allocate(act, na)
        else:
            if hk is None:
                fkey = (self.st.rkey, *[sig[act[k]] for k in range(na)])
            else:
                fkey = (self.st.rkey, hk, *[sig[act[k]] for k in range(na)])
            got = self.fills.get(fkey)
            if got is None:
                self._allocate(act, na)
                if len(self.fills) > 200_000:
                    self.fills.clear()
                self.fills[fkey] = [self.rate[act[k]] for k in range(na)]
            else:
                for k in range(na):
                    self.rate[act[k]] = got[k]
        if len(self.amemo) > 100_000:
            self.amemo.clear()
        self.amemo[key] = {sig[act[k]]: self.rate[act[k]] for k in range(na)}

    cdef void _hold(self):
        """Capacities less what exclusive partitions in use hold (Allocator.hold)."""
        cdef int r
        cdef double c
        hk = []
        for r in range(self.nres):
            self.capc[r] = self.st.cap[r]
            if self.reserved[r] != 0.0:
                hk.append((r, self.reserved[r]))
        if not hk:
            self.hkey = None
            return
        for r, u in hk:
            c = self.st.cap[<int>r] - <double>u
            self.capc[<int>r] = c if c > 0.0 else 0.0
        self.hkey = tuple(hk)

    # ---- the run ---------------------------------------------------------------------------------
    cdef object _run(self):
        cdef Static st = self.st
        cdef int n = self.n, i, k, nd, nk
        cdef long long seq = 0
        cdef long events = 0
        cdef double dt, t, t_next, ri, left
        cdef bint dirty
        for i in range(n):
            self.indeg[i] = st.indeg0[i]
            self.start[i] = self.end[i] = float("nan")
            self.remaining[i] = 1.0
            self.rate[i] = 0.0
        self.na = 0
        self.heap_n = 0
        self.whead = self.wtail = 0
        for i in range(n):
            self.admitted[i] = 0
        for k in range(self.nres):
            self.filling[k] = 0
            self.aq_head[k] = -1
        for i in range(n):
            self.granted[i] = 0
        for k in range(st.nsem):
            self.held[k] = self.peak[k] = 0
            self.swaits[k] = 0
            self.swait_s[k] = 0.0
            self.sq_head[k] = -1
        self.aq_n = 0
        self.disp_waits = 0
        self.disp_wait_s = 0.0
        self.now = 0.0
        first = [st.first[k] << 2 for k in range(st.nfirst)]
        if self.rng is not None:
            self.rng.shuffle(first)
        for k in first:
            self.work[self.wtail] = k
            self.wtail += 1
        dirty = self._process(&seq)
        while self.na or self.heap_n:
            if dirty and self.na:
                if self.held_changed:
                    self._hold()
                    self.held_changed = False
                self._allocate_all()
            dirty = False
            dt = INF
            for k in range(self.na):
                i = self.active[k]
                ri = self.rate[i]
                if ri > 0:
                    t = self.remaining[i] / ri
                    if t < dt:
                        dt = t
            t_next = self.now + dt
            if self.heap_n and self.heap_t[0] < t_next:
                t_next = self.heap_t[0]
                dt = t_next - self.now
            if dt == INF:
                return None  # a deadlock: the Python engine reruns it and names it
            if self.usage is not None and dt > 0:
                act = [self.active[k] for k in range(self.na)]
                self.usage.append((self.now, t_next, self.snapshot(act, self.ops, self.res,
                                                                   {i: self.rate[i] for i in act})))
            nd = nk = 0
            for k in range(self.na):
                i = self.active[k]
                left = self.remaining[i] - self.rate[i] * dt
                self.remaining[i] = left
                if left <= EPS:
                    self.done[nd] = i
                    nd += 1
                else:
                    self.keep[nk] = i
                    nk += 1
            self.now = t_next
            events += 1
            if nd:
                for k in range(nk):
                    self.active[k] = self.keep[k]
                self.na = nk
                if self.rng is not None:
                    done = [self.done[k] for k in range(nd)]
                    self.rng.shuffle(done)
                    for k in range(nd):
                        self.done[k] = done[k]
                for k in range(nd):
                    self.work[self.wtail] = self.done[k] << 2 | 2
                    self.wtail += 1
                dirty = True
            while self.heap_n and self.heap_t[0] <= self.now:
                self.work[self.wtail] = self._hpop() << 2 | 1
                self.wtail += 1
            if self.whead < self.wtail and self._process(&seq):
                dirty = True
        start = [self.start[i] for i in range(n)]
        end = [self.end[i] for i in range(n)]
        for i in range(n):
            if self.end[i] != self.end[i]:
                return None  # unfinished ops: the Python engine names them
        sem = None
        if st.nsem:
            sem = ([self.peak[k] for k in range(st.nsem)], [self.swaits[k] for k in range(st.nsem)],
                   [self.swait_s[k] for k in range(st.nsem)])
        return start, end, events, self.disp_waits, self.disp_wait_s, sem, self.usage, self.levels


def run(Static st, dict fills, rng=None, double jitter=0.0, trace=None):
    """``(start, end, events, dispatch waits, their total time, semaphores, usage, levels)`` of a run
    (semaphores: None, or their peak units held, waits and total wait, each a list in semaphore order;
    usage and levels: None unless ``trace``, a pair (the schedule, the Python engine's ``_snapshot``)),
    or None when it cannot finish (rerun it in Python). ``rng`` (a ``random.Random``) and ``jitter``
    are the Python engine's: the same draws at the same points."""
    return Run(st, fills, rng, jitter, trace)._run()
