"""Shared checks of the calibrate commands that write an owned CSV (kernel_repeatability.write_owned):
a file the workbench did not write is refused and left whole, a folder without tables is one line."""
from __future__ import annotations


def refuses_others_files_and_empty_folders(command: str, tables, tmp_path, capsys) -> None:
    from workbench.cli import main
    mine = tmp_path / "notes.csv"
    mine.write_text("a file the workbench did not write\n")
    assert main(["calibrate", command, "--tables", str(tables), "--out", str(mine)]) == 2
    assert mine.read_text() == "a file the workbench did not write\n" and "notes.csv" in capsys.readouterr().err
    empty = tmp_path / "none"
    empty.mkdir()
    assert main(["calibrate", command, "--tables", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "tables=" in err and "allowed" in err and len(err.strip().splitlines()) == 1
