"""Small text corpora (WikiText-2) as lists of paragraphs."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from trainleak.data._files import corrupt_error, find_file, resolve_data_dir
from trainleak.validation import check_choice


def load_wikitext2(
    split: Literal["test", "valid"] = "test", data_dir: str | Path | None = None
) -> list[str]:
    """Load the paragraphs of a WikiText-2 split from ``<data_dir>/text/wikitext-2/<split>.txt``.

    The file is the tokenised release (``<unk>``, `` @-@ ``), one paragraph per line. Blank
    lines and heading lines (`` = Title = ``, `` = = Section = = ``) are dropped; the rest
    are returned stripped, in file order.

    Args:
        split: ``"test"`` or ``"valid"`` (the train split is not staged).
        data_dir: the data root; ``None`` reads ``$TRAINLEAK_DATA``.

    Returns:
        The paragraphs, each a non-empty string.

    Raises:
        ConfigError: for an unknown split.
        DataNotFoundError: if the file is missing; ``CorruptDataError`` if it is not UTF-8.

    References:
        Merity, Xiong, Bradbury, Socher, "Pointer Sentinel Mixture Models", ICLR 2017.
    """
    check_choice("split", split, ("test", "valid"))
    root = resolve_data_dir(data_dir)
    path = find_file(root, "text/wikitext-2", [f"{split}.txt"])
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise corrupt_error(path, f"not UTF-8 text ({exc})") from exc
    lines = (line.strip() for line in text.splitlines())
    return [s for s in lines if s and not (s.startswith("=") and s.endswith("="))]
