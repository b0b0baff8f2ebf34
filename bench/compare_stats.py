"""What the comparison tables share (bench/compare_torch.sh's and bench/compare_precision_table.py's):
medians with their spread over rounds, and an engine's best thread count."""
import statistics

med = statistics.median


def spread(v, k=1.0, fmt="{:,.0f}"):
    """The median of v (times k) and its [min-max], each formatted with fmt."""
    v = list(v)
    return f"{fmt.format(med(v) * k)} [{fmt.format(min(v) * k)}-{fmt.format(max(v) * k)}]"


def best(runs, kind, w, batch, t):
    """(u, {round: rate}) for the thread count u <= t whose median rate is highest, or None.
    runs maps (kind, workload, batch, threads) to {round: rate}."""
    b = None
    for u in range(1, t + 1):
        v = runs.get((kind, w, batch, u))
        if v and (b is None or med(v.values()) > med(b[1].values())):
            b = (u, v)
    return b
