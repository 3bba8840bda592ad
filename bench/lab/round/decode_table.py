"""What the decode round scripts' tables (decode5.sh, decode6.sh) read from `flexattn bench --suite decode` logs."""

# The suite's shapes as (B, S, page, window) in table order: 8x8k, 1x128k, 64x4k, each contiguous / page 16 / 128.
SHAPES = [(8, 8192, 0, 0), (8, 8192, 16, 0), (8, 8192, 128, 0), (1, 131072, 0, 0), (1, 131072, 16, 0),
          (1, 131072, 128, 0), (64, 4096, 0, 0), (64, 4096, 16, 0), (64, 4096, 128, 0)]


def rows(path):
    """The log's result rows: ((B, S, page, window), splits, ms, GB/s, back-to-back GB/s); [] when unreadable."""
    r = []
    try:
        for ln in open(path):
            f = ln.split()
            if len(f) == 8 and f[0].isdigit():
                r.append(((int(f[0]), int(f[1]), int(f[2]), int(f[3])), int(f[4]), float(f[5]), float(f[6]), float(f[7])))
    except OSError:
        pass
    return r


def first(path):
    """The first row per shape (auto splits unless a sweep's first entry says otherwise): shape -> (GB/s, splits,
    ms, back-to-back GB/s)."""
    d = {}
    for k, sp, ms, gb, b2b in rows(path):
        d.setdefault(k, (gb, sp, ms, b2b))
    return d
