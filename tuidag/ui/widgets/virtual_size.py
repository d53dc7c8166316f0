"""Growing a Line-API `ScrollView`'s virtual size without laying out the whole screen (the log pane, the finder)."""

from __future__ import annotations

from textual.geometry import Size
from textual.scroll_view import ScrollView


def set_virtual_size(view: ScrollView, size: Size) -> None:
    """`view.virtual_size = size`, without the layout of the whole screen that assignment asks for.

    The reactive is declared with `layout=True`: every change re-arranges every widget on the screen and repaints them
    all (~20 ms at 160x45), and a followed log changes it on every tick, a new selection on every key press. A
    `ScrollView`'s own size never depends on its virtual size (ours are sized by CSS), only its scrollbars do, so
    update just those, as the layout pass would (`ScrollView._size_updated`); a scrollbar that appears or disappears
    still asks for a layout itself. Before the view's first layout there is nothing to save: assign as usual."""
    if size == view.virtual_size:
        return
    if not view.size:
        view.virtual_size = size
        return
    view.set_reactive(ScrollView.virtual_size, size)
    view._scroll_update(size)
    view.refresh()
