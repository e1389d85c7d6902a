"""The column kernels' rows two at a time (eb_dw_opt.c, eb_col1_rows2_s1 / _s2): which
convolutions take them and the scratch their records claim -- the twin of
eb_col_rows2_gains, so that a step links the path ("dw_column_rows2") and the plan counts
its bytes.

Two output rows of one channel read the same input rows where the kernel is taller than
its stride down the columns: over their union of tap rows a block of 2 pixels of both rows
loads each input word once for 4 sums (11 instructions per 8 multiplies at stride 2 along
the rows, 10 at 1), where one row's tap pairs take 17 (13)."""

from __future__ import annotations

from edgebuild.core.geometry import Plane

COST_TWO = {1: 10, 2: 11}  # instructions a record of the two rows' union, by stride_w
COST_ONE = {1: 13, 2: 17}  # ... a tap pair of one row's (eb_col1_pairs_s1 / _s2)


def rows_apart(conv: Plane) -> int:
    """Kernel rows from one output row's taps to the next's: stride_h / dil_h."""
    return conv.stride_h // conv.dil_h


def records(conv: Plane) -> int:
    """Pairs of the union's entries: in_c / groups x k_w x (k_h + rows_apart), halved up."""
    entries = conv.in_c // conv.groups * conv.k_w * (conv.k_h + rows_apart(conv))
    return (entries + 1) // 2


BLOCK = 30  # instructions a block of 4 outputs beside its records or pairs, about
LAST = {1: 8, 2: 9}  # a tap pair of a row's last block of 2 pixels (EB_COL1_TWO, _S2)
LAST_BLOCK = 25  # ... and beside its pairs


def row_cost(pairs: int, out_w: int, stride_w: int) -> int:
    """eb_col_row_cost: one row's instructions by tap pairs -- blocks of 4 pixels (a row of
    4 n + 3 ends with one stepping back) and a last block of 2 where 1 or 2 are left."""
    left, full = out_w % 4, out_w // 4 + (out_w % 4 == 3)
    last = pairs * LAST[stride_w] + LAST_BLOCK if left in (1, 2) else 0
    return full * (pairs * COST_ONE[stride_w] + BLOCK) + last


CYCLES_TWO = {1: 15, 2: 16}  # estimated cycles of a record (its LDM of 4 words: 5)
CYCLES_ONE = {1: 17, 2: 21}  # ... of a tap pair of one row's


def gains(conv: Plane) -> bool:
    """eb_col_rows2_gains: stride_h a multiple of dil_h (the rows' taps on one grid), a row
    pair's blocks of 2 pixels by the union's records under 9/10 of its two rows by tap
    pairs in instructions, and the records' estimated cycles at most 94 % of the pairs' (a
    record saves fewer cycles than instructions). (Of a conv the column kernels take with
    one output channel a group, or an odd count: the last alone; the C asks it of the
    channels it runs alone.)"""
    s = conv.stride_w
    if conv.stride_h % conv.dil_h or s not in COST_TWO:
        return False
    pairs, union = (conv.in_c // conv.groups * conv.k_w * conv.k_h + 1) // 2, records(conv)
    two = (conv.out_w + 1) // 2 * (union * COST_TWO[s] + BLOCK)
    return 10 * two < 9 * 2 * row_cost(pairs, conv.out_w, s) and \
        100 * union * CYCLES_TWO[s] <= 94 * pairs * CYCLES_ONE[s]


COLUMN_MAX_OUT = 4  # eb_dw_opt.c: EB_COL_MAX_OUT (ops.conv_path.COLUMN_MAX_OUT)


def takes(conv: Plane) -> bool:
    """Whether a conv of the column kernels' kind may run rows two at a time: a channel run
    alone (an odd count of outputs a group) whose records gain, no width padding (a padded
    row's edge outputs run one at a time), a kernel one column wide with one input a group
    or at most COLUMN_MAX_OUT outputs a group with more. Only the layer's kind, not its
    sizes: the C takes them for every output row pair with a tap inside the input of
    whatever tile of the layer it is given, so the claim (`elements`) holds for every
    tile, the column kernels' size conditions (ops.conv_path.column) aside."""
    cin_g, cout_g = conv.in_c // conv.groups, conv.out_c // conv.groups
    kind = cout_g <= COLUMN_MAX_OUT if cin_g > 1 else conv.k_w == 1
    return kind and cout_g % 2 == 1 and gains(conv) and conv.pad_w == 0


def elements(conv: Plane) -> int:
    """The int16 elements EB_COL_ROWS2_SCRATCH counts (8 a record) for a conv that may take
    the rows (`takes`), else 0."""
    return 8 * records(conv) if takes(conv) else 0


def scratch(conv: Plane) -> str | None:
    """The C claim (EB_COL_ROWS2_SCRATCH) of a conv that takes the rows, else None."""
    if not takes(conv):
        return None
    return (f"EB_COL_ROWS2_SCRATCH({conv.in_c // conv.groups}, {conv.k_h}, {conv.k_w}, "
            f"{rows_apart(conv)})")
