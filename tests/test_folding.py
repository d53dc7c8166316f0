"""Matrix groups folded on the graph: the graph a folded group makes (one node, its edges merged), in an order the
layout can read, and back to the whole DAG once unfolded. Plain data, no textual."""

from __future__ import annotations

from tuidag.model.layering import longest_path_layers
from tuidag.views.layout.build import layout_deps
from tuidag.views.layout.folding import Folding

TRAIN = [f"train[seed={s}]" for s in (1, 2, 3)]
EVAL = [f"eval[seed={s}]" for s in (1, 2, 3)]
DEPS = {
    "prepare": [],
    **{t: ["prepare"] for t in TRAIN},
    **{e: [t] for e, t in zip(EVAL, TRAIN)},
    "report": EVAL,
}


def test_a_folded_group_is_one_node_with_the_edges_of_its_instances():
    folding = Folding(DEPS, {"train": TRAIN, "eval": EVAL})
    assert folding.deps() == {"prepare": [], "train": ["prepare"], "eval": ["train"], "report": ["eval"]}
    assert folding.tile_of("train[seed=2]") == "train" and folding.tile_of("report") == "report"
    assert folding.expand(["prepare", "train"]) == ["prepare", *TRAIN]


def test_unfolding_one_group_draws_its_instances_wired_to_the_folded_other():
    folding = Folding(DEPS, {"train": TRAIN, "eval": EVAL})
    assert folding.unfold("train") and not folding.unfold("train")
    deps = folding.deps()
    assert deps["eval"] == TRAIN and all(deps[t] == ["prepare"] for t in TRAIN)
    layers = longest_path_layers(deps.items())  # the order is topological: layering reads it in one pass
    assert layers["report"] == 3
    assert folding.fold("train") and folding.deps() == Folding(DEPS, {"train": TRAIN, "eval": EVAL}).deps()
    folding.unfold("train")
    folding.unfold("eval")
    assert folding.deps() == DEPS


def test_a_folded_sweep_of_a_thousand_instances_lays_out_as_one_tile():
    instances = [f"train[i={i}]" for i in range(1000)]
    deps = {"prepare": [], **{i: ["prepare"] for i in instances}, "report": instances}
    layout = layout_deps(Folding(deps, {"train": instances}).deps())
    assert set(layout.tiles) == {"prepare", "train", "report"}
