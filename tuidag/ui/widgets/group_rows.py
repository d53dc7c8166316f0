"""The keys that fold and unfold matrix groups in a pane of one task a row (the list, the timeline), as the graph's
do: `+` / Enter on a group's row lists its instances, `-` on an instance folds its group back. Anywhere else the
keys are the app's (`+` / `-` size the log pane)."""

from __future__ import annotations

from collections.abc import Callable

from textual.binding import Binding, BindingType

from ...views.layout.folding import Folding

GROUP_ROW_KEYS: list[BindingType] = [
    Binding("enter,plus", "unfold", "Unfold", show=False, tooltip="On a matrix group's row: list its instances"),
    Binding("minus", "fold", "Fold", show=False, tooltip="On a matrix instance: fold its group into one row"),
]


class GroupRows:
    """Mixed into a pane (before its Textual base, so `check_action` is this one) that sets these in `__init__`."""

    folding: Folding
    on_fold: Callable[[str, bool], None] | None  # (group, unfold): the app folds every view alike
    selected: str | None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "unfold":
            return self.selected in self.folding.folded
        if action == "fold":
            return self.selected in self.folding.group_of
        return True

    def action_unfold(self) -> None:
        if self.on_fold is not None and self.selected is not None:
            self.on_fold(self.selected, True)

    def action_fold(self) -> None:
        group = self.folding.group_of.get(self.selected or "")
        if self.on_fold is not None and group is not None:
            self.on_fold(group, False)
