"""Network precomputation, docs/model.md §3 and §9-§10 (kernels/network.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernels
from kernels import network
from kernels.strategies.spatial import spatial_share
from tests.helpers import kind_codes, layer_arrays, small_layers

# --------------------------------------------------------------------------- FLOPs


@pytest.mark.parametrize(
    ("kind", "x", "w", "y", "want"),
    [
        # conv 2 C F prod(K) prod(Y): 2 * 2 * 3 * (3*3) * (3*3) = 972
        ("conv", (2, 5, 5), (2, 3, 3, 3), (3, 3, 3), 972),
        # 1-D conv: 2 * 2 * 4 * 3 * 6 = 288
        ("conv", (2, 8), (2, 4, 3), (4, 6), 288),
        # 3-D conv: 2 * 1 * 2 * 27 * 8 = 864
        ("conv", (1, 4, 4, 4), (1, 2, 3, 3, 3), (2, 2, 2, 2), 864),
        # fc 2 C F prod(K), kernel covering the input: 2 * 3 * 5 * 16 = 480
        ("fc", (3, 4, 4), (3, 5, 4, 4), (5, 1, 1), 480),
        # ParaDL-style fc on a 1x1 input: 2 * 10 * 4 * 1 = 80
        ("fc", (10, 1, 1), (10, 4, 1, 1), (4, 1, 1), 80),
        # pooling C prod(K) prod(Y) with C = x[0] (weight shape 0x0xK): 4 * 4 * 9 = 144
        ("pool_max", (4, 6, 6), (0, 0, 2, 2), (4, 3, 3), 144),
        # 4 * 9 * 16 = 576
        ("pool_avg", (4, 6, 6), (0, 0, 3, 3), (4, 4, 4), 576),
        # relu, add, dropout |y|: 3*4*4 = 48, 2*3*3 = 18, 5
        ("relu", (3, 4, 4), (3, 3, 0, 0), (3, 4, 4), 48),
        ("add", (2, 3, 3), (2, 2, 0, 0), (2, 3, 3), 18),
        ("dropout", (5, 1, 1), (5, 5, 0, 0), (5, 1, 1), 5),
        # bnorm 4 |x| = 4 * 48 = 192
        ("bnorm", (3, 4, 4), (3, 3, 0, 0), (3, 4, 4), 192),
    ],
)
def test_forward_flops_by_kind(kind, x, w, y, want):
    la = layer_arrays((kind,), [x], [w], [y])
    got = network.forward_flops(la.kind, la.x, la.w, la.y)
    assert got.tolist() == [want]


def test_training_flops_are_three_times_forward(small_net):
    # Small net forward 1728 + 48 + 480 = 2256; training 3 * 2256 = 6768.
    assert float(small_net.flops) == 6768.0


def test_small_net_totals(small_net):
    assert float(small_net.dataset_samples) == 1000.0
    assert float(small_net.n_layers) == 3.0
    assert float(small_net.w_elems) == 294.0  # 54 + 0 + 240 (relu weight shape 3x3x0x0 is empty)
    assert float(small_net.act_elems) == 133.0  # conv 32 + 48, fc 48 + 5; relu is in place
    assert float(small_net.t_measured_s) == 0.0


# --------------------------------------------------------------------------- active masks


def test_default_active_masks():
    # filter: conv and fc; channel: conv and fc except layer 0.
    kinds = kind_codes("conv", "bnorm", "relu", "pool_max", "conv", "add", "pool_avg", "fc", "dropout")
    filt, chan = network.default_active(kinds)
    assert filt.tolist() == [True, False, False, False, True, False, False, True, False]
    assert chan.tolist() == [False, False, False, False, True, False, False, True, False]


def test_default_channel_mask_when_first_layer_is_not_conv():
    filt, chan = network.default_active(kind_codes("pool_max", "conv", "fc"))
    assert filt.tolist() == [False, True, True]
    assert chan.tolist() == [False, True, True]


def test_filter_and_channel_sums(small_net):
    f, c = small_net.filter, small_net.channel
    # filter active: conv, fc. FLOPs 5184 + 1440; weights 54 + 240; exchange after conv only
    # (fc is the network's last layer): y = 3*4*4 = 48, 1 layer; max p = min F = min(3, 5).
    assert [float(v) for v in f[:5]] == [6624.0, 294.0, 48.0, 1.0, 3.0]
    # by kind (KINDS order conv, fc, ...): FLOPs conv 5184, fc 1440; |x|+|y| conv 80, fc 53
    assert f.flops_kind[:2].tolist() == [5184.0, 1440.0] and f.flops_kind[2:].sum() == 0
    assert f.traffic_kind[:2].tolist() == [80.0, 53.0] and f.traffic_kind[2:].sum() == 0
    # channel active: fc only (layer 0 is excluded); the last layer exchanges nothing;
    # max p = C of the fc = 3.
    assert [float(v) for v in c[:5]] == [1440.0, 240.0, 0.0, 0.0, 3.0]
    assert c.flops_kind[:2].tolist() == [0.0, 1440.0] and c.traffic_kind[:2].tolist() == [0.0, 53.0]


def test_filter_override_replaces_defaults():
    net = kernels.build_net(small_layers({"filter": [True, False, False]}), 1000)
    # Only the conv: FLOPs 5184, weights 54, exchange y 48 once, max p = F = 3.
    assert [float(v) for v in net.filter[:5]] == [5184.0, 54.0, 48.0, 1.0, 3.0]


# --------------------------------------------------------------------------- halos


@pytest.mark.parametrize(
    ("x", "w", "y", "has_halo", "elems"),
    [
        # 2-D, K = 3 -> h = 1: halo_x = C h X2 = 2*1*4 = 8, halo_dy = F h Y2 = 3*1*4 = 12
        ((2, 4, 4), (2, 3, 3, 3), (3, 4, 4), True, 20),
        # 1-D, K = 5 -> h = 2: 2*2 + 4*2 = 12
        ((2, 8), (2, 4, 5), (4, 8), True, 12),
        # 3-D, K = 3 -> h = 1: 1*1*5*4 + 2*1*5*4 = 60
        ((1, 6, 5, 4), (1, 2, 3, 3, 3), (2, 6, 5, 4), True, 60),
        # K = 4 -> h = floor(3/2) = 1: 2*1*4 + 3*1*2 = 14
        ((2, 4, 4), (2, 3, 4, 4), (3, 2, 2), True, 14),
        # K = 1 and K = 2 -> h = 0
        ((2, 4, 4), (2, 3, 1, 1), (3, 4, 4), False, 0),
        ((2, 4, 4), (0, 0, 2, 2), (2, 2, 2), False, 0),
        # no kernel (relu, weight shape CxFx0x0) -> h = 0
        ((3, 4, 4), (3, 3, 0, 0), (3, 4, 4), False, 0),
    ],
)
def test_halo_elems(x, w, y, has_halo, elems):
    la = layer_arrays(("conv",), [x], [w], [y])
    mask, got = network.halo_elems(la.x, la.w, la.y)
    assert mask.tolist() == [has_halo]
    if has_halo:
        assert got.tolist() == [elems]


# --------------------------------------------------------------------------- spatial table


def ladder_layers(active=None):
    """Six layers whose split extents min(x[1], y[1]) shrink 16, 8, 8, 4, then an fc.

    ===  ========  =========  ==========  =========  ===========  ========  ====  ========
    l    kind      x          w           y          train FLOPs  x+y (nip) halo  y_last
    ===  ========  =========  ==========  =========  ===========  ========  ====  ========
    0    conv      3x16x16    3x8x3x3     8x16x16    331776       2816      176   2048
    1    pool_max  8x16x16    0x0x2x2     8x8x8      6144         2560      -     512
    2    relu      8x8x8      8x8x0x0     8x8x8      1536         in place  -     512
    3    conv      8x8x8      8x4x3x3     4x4x4      27648        576       80    64
    4    fc        4x4x4      4x10x4x4    10x1x1     (never active by default)
    5    dropout   10x1x1     10x10x0x0   10x1x1
    ===  ========  =========  ==========  =========  ===========  ========  ====  ========

    FLOPs: conv0 3 * 2*3*8*9*256; pool 3 * 8*4*64; relu 3 * 512; conv3 3 * 2*8*4*9*16.
    Halo (h = 1): conv0 3*16 + 8*16 = 176; conv3 8*8 + 4*4 = 80.
    """
    return layer_arrays(
        ("conv", "pool_max", "relu", "conv", "fc", "dropout"),
        x=[(3, 16, 16), (8, 16, 16), (8, 8, 8), (8, 8, 8), (4, 4, 4), (10, 1, 1)],
        w=[(3, 8, 3, 3), (0, 0, 2, 2), (8, 8, 0, 0), (8, 4, 3, 3), (4, 10, 4, 4), (10, 10, 0, 0)],
        y=[(8, 16, 16), (8, 8, 8), (8, 8, 8), (4, 4, 4), (10, 1, 1), (10, 1, 1)],
        active=active,
    )


def test_spatial_prefix_table():
    t = kernels.build_net(ladder_layers(), 100).spatial
    # Rows = number of active prefix layers (0..4, the fc at index 4 caps the prefix).
    np.testing.assert_array_equal(t.neg_prefix_min, [-16, -8, -8, -4])
    np.testing.assert_array_equal(t.flops, [0, 331776, 337920, 339456, 367104])
    np.testing.assert_array_equal(t.act_elems, [0, 2816, 5376, 5376, 5952])
    np.testing.assert_array_equal(t.halo_layers, [0, 1, 1, 1, 2])
    np.testing.assert_array_equal(t.halo_elems, [0, 176, 176, 176, 256])
    np.testing.assert_array_equal(t.y_last_elems, [0, 2048, 512, 512, 64])
    np.testing.assert_array_equal(t.max_p, [0, 16, 8, 8, 4])


@pytest.mark.parametrize(
    ("n", "row"),
    [
        (1, 4),  # every layer before the fc has extent >= 1
        (2, 4),
        (4, 4),  # conv3's extent min(8, 4) = 4 still allows 4
        (5, 3),  # conv0, pool, relu (extents 16, 8, 8)
        (8, 3),
        (9, 1),  # conv0 only
        (16, 1),
        (17, 0),  # nothing can be split
    ],
)
def test_spatial_default_active_prefix_by_group_size(n, row):
    t = kernels.build_net(ladder_layers(), 100).spatial
    share = spatial_share(t, np.float64(n))
    assert float(share.flops) == t.flops[row]
    assert float(share.act_elems) == t.act_elems[row]
    assert float(share.halo_elems) == t.halo_elems[row]
    assert float(share.y_last_elems) == t.y_last_elems[row]
    assert bool(share.over_max_p) == (row == 0)


def test_spatial_override_is_one_row_for_every_group_size():
    t = kernels.build_net(ladder_layers({"spatial": [False, True, True, True, False, False]}), 100).spatial
    # pool + relu + conv3: FLOPs 6144 + 1536 + 27648 = 35328; activations 2560 + 576 (relu in
    # place); halo only conv3 (pool K = 2 has h = 0): 1 layer, 80; last active y = 4*4*4 = 64;
    # max p = min(8, 8, 4) = 4.
    assert t.neg_prefix_min.shape == (0,)
    assert t.flops.tolist() == [35328]
    assert t.act_elems.tolist() == [3136]
    assert t.halo_layers.tolist() == [1]
    assert t.halo_elems.tolist() == [80]
    assert t.y_last_elems.tolist() == [64]
    assert t.max_p.tolist() == [4]
    for n, over in [(1, False), (4, False), (5, True)]:
        share = spatial_share(t, np.float64(n))
        assert float(share.flops) == 35328
        assert bool(share.over_max_p) == over


# --------------------------------------------------------------------------- min-max partition


def spec_partition(cost, p):
    """The rule of docs/model.md §10.4, written from the text: t* by brute force over every contiguous
    partition, then groups from the first layer on, each taking layers while its sum stays
    <= t* and enough layers remain to give every later group at least one."""
    g = len(cost)
    best = min(
        max(sum(cost[a:b]) for a, b in itertools.pairwise((0, *cuts, g)))
        for cuts in itertools.combinations(range(1, g), p - 1)
    )
    starts = [0]
    for layer in range(1, g):
        later_groups = p - len(starts)  # groups still to open after the current one
        sum_if_taken = sum(cost[starts[-1] : layer + 1])
        if later_groups > 0 and (sum_if_taken > best or g - layer <= later_groups):
            starts.append(layer)
    return best, starts


def group_max(cost, starts):
    bounds = [*starts, len(cost)]
    return max(sum(cost[a:b]) for a, b in itertools.pairwise(bounds))


@settings(deadline=None, max_examples=300)
@given(
    st.lists(st.integers(min_value=0, max_value=9), min_size=1, max_size=8),
    st.data(),
)
def test_minmax_partition_matches_brute_force(cost, data):
    p = data.draw(st.integers(min_value=1, max_value=len(cost)), label="p")
    best, want = spec_partition(cost, p)
    got = network.minmax_partition(np.array(cost, dtype=np.float64), p)
    assert len(got) == p and got[0] == 0 and all(b > a for a, b in itertools.pairwise(got))
    assert group_max(cost, got) == best
    assert list(got) == want
    # The rule picks, among the optimal partitions, the lexicographically largest starts.
    g = len(cost)
    optimal = [
        (0, *cuts)
        for cuts in itertools.combinations(range(1, g), p - 1)
        if group_max(cost, (0, *cuts)) == best
    ]
    assert tuple(got) == max(optimal)


@pytest.mark.parametrize(
    ("cost", "p", "starts"),
    [
        ([5184, 144, 1440], 2, [0, 1]),  # t* = 5184: {conv} {relu, fc}
        ([1, 1, 1, 1], 2, [0, 2]),
        ([2, 1, 1, 2], 3, [0, 1, 3]),
        ([1, 0, 0, 1], 2, [0, 3]),  # zeros join the earlier group
        ([3, 0, 0], 3, [0, 1, 2]),  # enough layers must remain for the later groups
        ([4, 1, 1, 1, 1, 4], 3, [0, 1, 5]),  # t* = 4: {4} {1,1,1,1} {4}
    ],
)
def test_minmax_partition_examples(cost, p, starts):
    assert network.minmax_partition(np.array(cost, dtype=np.float64), p) == starts


@pytest.mark.parametrize("p", [0, 4])
def test_minmax_partition_rejects_bad_p(p):
    with pytest.raises(ValueError):
        network.minmax_partition(np.array([1.0, 2.0, 3.0]), p)


# --------------------------------------------------------------------------- pipeline table


def test_pipeline_table_small_net(small_net):
    t = small_net.pipeline
    # Training FLOPs 5184 (conv), 144 (relu), 1440 (fc); weights 54, 0, 240;
    # non-in-place x+y 80, 0, 53; outputs y 48, 48, 5.
    # p = 1: {conv, relu, fc}: 6768 FLOPs, weights 294, no boundary.
    # p = 2: t* = min(max(5184, 1584), max(5328, 1440)) = 5184: {conv} {relu, fc};
    #        boundary after conv: y = 48; weights max(54, 240) = 240.
    # p = 3: one layer each: max FLOPs 5184, boundaries y0 = y1 = 48, weights 240.
    np.testing.assert_array_equal(t.flops_max, [0, 6768, 5184, 5184])
    np.testing.assert_array_equal(t.w_max, [0, 294, 240, 240])
    np.testing.assert_array_equal(t.y_boundary_max, [0, 0, 48, 48])
    # Memory envelope: groups (act, w) are p=1: (133, 294); p=2: (80, 54), (53, 240);
    # p=3: (80, 54), (0, 0), (53, 240). Lines 53B+240 (max at B=0) and 80B+54 (overtakes at
    # B = (240-54)/(80-53) = 6.9) form the envelope; the empty group never does.
    np.testing.assert_array_equal(t.mem_act, [[0, 0], [133, 0], [53, 80], [53, 80]])
    np.testing.assert_array_equal(t.mem_w, [[0, 0], [294, 0], [240, 54], [240, 54]])


@settings(deadline=None, max_examples=60)
@given(
    st.lists(st.tuples(st.integers(0, 50), st.integers(0, 500)), min_size=1, max_size=12),
    st.lists(st.integers(0, 200), min_size=1, max_size=8),
)
def test_upper_envelope_gives_the_same_maximum_as_all_lines(lines, xs):
    """max over the envelope's lines equals max over every line, for any x >= 0."""
    from kernels.network import upper_envelope

    a = np.array([s for s, _ in lines], dtype=float)
    w = np.array([c for _, c in lines], dtype=float)
    hull = upper_envelope(a, w)
    for x in xs:
        assert max(a[hull] * x + w[hull]) == max(a * x + w)
