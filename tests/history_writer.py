"""A second process writing into a history store: `import` some folders, or `hold` them
written inside an open transaction (touching READY) until it is killed."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from harness.history import importer, store
from harness.history.folders import read_folder


def main(url: str, mode: str, ready: str, dirs: list[str]) -> None:
    engine = store.open_store(store.Where(url, url))
    if mode == "import":
        for _ in range(3):  # again and again: a second import adds nothing
            importer.import_paths(engine, [Path(d) for d in dirs])
        return
    with engine.begin() as conn:
        for d in dirs:
            importer.write_folder(conn, read_folder(Path(d)))
        Path(ready).write_text("written, not committed\n")
        time.sleep(600)  # killed here, mid-transaction


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
