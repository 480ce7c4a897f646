"""The study runner under careless and hostile use (issue 14, items 1-4): a study is a
name, never a path; nothing the workbench did not write is replaced or deleted; the swap
is atomic and a killed run is repaired; values reach the report escaped; the PDF step has
its own time limit and its failure keeps the HTML; a dying kernel names its cell."""
from __future__ import annotations

import json
import os
import shutil
import stat

import pytest

from workbench import report
from workbench.cli import main
from workbench.errors import InputError
from workbench.safe_output import MANIFEST, foreign_files, install, private_folder, recover
from workbench.studies import StudyError, run_study



@pytest.fixture
def no_pdf(monkeypatch):
    """Runs without a browser: the PDF step says so and the HTML is kept (faster tests)."""
    monkeypatch.setenv("WORKBENCH_CHROMIUM", "/nonexistent/chromium")


@pytest.mark.parametrize("name", ["/some/dir/x", "../studies/quantization", "tiny/../tiny", "Tiny", "", "tiny.yaml"])
def test_a_study_is_a_name_not_a_path(root, name):
    with pytest.raises(InputError, match="allowed: tiny"):
        run_study(name, root=root, out_root=root / "reports")
    assert not (root / "reports").exists() or not any((root / "reports").iterdir())


def test_cli_refuses_a_path_as_study_with_one_line(capsys):
    assert main(["run", "/tmp/x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("workbench: error: study='/tmp/x' is not known")


def test_a_notebook_outside_the_project_is_refused(root, tmp_path):
    (root / "studies" / "escape.yaml").write_text(f"notebook: {tmp_path}/elsewhere.ipynb\n")
    with pytest.raises(InputError, match="notebook"):
        run_study("escape", root=root, out_root=root / "reports")


def test_files_the_workbench_did_not_write_are_never_replaced(root, no_pdf):
    out = root / "reports"
    (out / "tiny").mkdir(parents=True)
    mine = out / "tiny" / "my_notes.txt"
    mine.write_text("keep me")
    with pytest.raises(InputError, match="my_notes.txt"):
        run_study("tiny", smoke=True, root=root, out_root=out)
    assert mine.read_text() == "keep me"
    index = out / "index.html"
    index.write_text("<html>my own index</html>")
    shutil.rmtree(out / "tiny")
    run_study("tiny", smoke=True, root=root, out_root=out)
    assert index.read_text() == "<html>my own index</html>"  # not ours: left alone
    (out / "tiny" / "added_later.csv").write_text("1,2")
    with pytest.raises(InputError, match="added_later.csv"):
        run_study("tiny", smoke=True, root=root, out_root=out)
    run_study("tiny", smoke=True, root=root, out_root=out, force=True)  # asked for: replaced
    assert not (out / "tiny" / "added_later.csv").exists()


def test_a_rerun_replaces_its_own_report_and_keeps_it_on_failure(root, no_pdf):
    out = root / "reports"
    first = run_study("tiny", smoke=True, root=root, out_root=out)
    manifest = json.loads((first / MANIFEST).read_text())
    assert "tiny.html" in manifest["files"] and "run.json" in manifest["files"]
    before = (first / "tiny.html").read_bytes()
    with pytest.raises(StudyError):
        run_study("tiny", overrides={"fail": True}, root=root, out_root=out)
    assert (first / "tiny.html").read_bytes() == before
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []  # no temp folder left
    assert foreign_files(first) == []


def test_a_kill_between_the_renames_is_repaired_by_the_next_run(root, no_pdf):
    out = root / "reports"
    run_study("tiny", smoke=True, root=root, out_root=out)
    dead = 2 ** 22 + 12345  # above Linux's default pid_max: no such process
    (out / "tiny").rename(out / f".tiny.old-{dead}")  # the old report moved aside, the new one never came
    (out / f".tiny.tmp-{dead}-abc").mkdir()  # and a killed run's temp folder
    done = recover(out, "tiny")
    assert f"restored tiny from .tiny.old-{dead}" in done and f"removed .tiny.tmp-{dead}-abc" in done
    assert (out / "tiny" / "tiny.html").exists()


def test_install_swaps_in_one_step(tmp_path):
    final, new = tmp_path / "r", tmp_path / ".r.tmp-1"
    final.mkdir()
    (final / "a").write_text("old")
    new.mkdir()
    (new / "a").write_text("new")
    install(new, final)
    assert (final / "a").read_text() == "new" and not new.exists()


def test_two_runs_in_one_process_get_their_own_temp_folders(tmp_path):
    assert private_folder(tmp_path, "tiny") != private_folder(tmp_path, "tiny")


def test_a_corrupt_run_json_is_skipped_and_named_in_the_index(root, no_pdf, capsys):
    out = root / "reports"
    run_study("tiny", smoke=True, root=root, out_root=out)
    (out / "broken").mkdir()
    (out / "broken" / "run.json").write_text("{not json")
    assert report.write_index(out) is not None
    page = (out / "index.html").read_text()
    assert "Skipped (corrupt run.json): broken" in page and "Tiny study" in page
    assert "broken" in capsys.readouterr().out
    run_study("tiny", smoke=True, root=root, out_root=out)  # a later run still succeeds


def test_rerender_of_a_corrupt_run_is_one_clean_error(root, no_pdf):
    from workbench.studies import rerender
    out = root / "reports"
    run_study("tiny", smoke=True, root=root, out_root=out)
    (out / "tiny" / "run.json").write_text("[1, 2")
    with pytest.raises(InputError, match="corrupt"):
        rerender("tiny", out_root=out, root=root)


def test_parameter_values_reach_the_report_escaped(root, no_pdf):
    out = run_study("tiny", smoke=True, root=root, out_root=root / "reports",
                    overrides={"label": "<img src=x onerror=alert(1)>"})
    page = (out / "tiny.html").read_text()
    assert "<img src=x" not in page  # no live tag
    assert "&lt;img src=x onerror=alert(1)&gt;" in page  # the text, shown as text


def test_out_must_be_a_writable_folder(root, tmp_path):
    f = tmp_path / "a_file"
    f.write_text("")
    with pytest.raises(InputError, match="is a file"):
        run_study("tiny", root=root, out_root=f)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    if os.geteuid() != 0:  # root writes anywhere
        with pytest.raises(InputError, match="not writable"):
            run_study("tiny", root=root, out_root=ro)


def test_a_dying_kernel_names_its_cell(root, no_pdf):
    with pytest.raises(StudyError, match=r"failed in cell \d+ \('import os'\): DeadKernelError"):
        run_study("tiny", overrides={"die": True}, root=root, out_root=root / "reports")
    assert not (root / "reports" / "tiny").exists()


def test_a_hanging_browser_is_stopped_and_the_html_kept(tmp_path, monkeypatch):
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\nsleep 60\n")
    fake.chmod(0o755)
    monkeypatch.setenv("WORKBENCH_CHROMIUM", str(fake))
    html = tmp_path / "r.html"
    html.write_text("<html><body>report</body></html>")
    pdf, message = report.export_pdf(html, tmp_path / "r.pdf", timeout_s=1)
    assert pdf is None and "within 1 s" in message and html.exists()


def test_a_chromium_setting_that_is_a_folder_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CHROMIUM", str(tmp_path))
    html = tmp_path / "r.html"
    html.write_text("<html></html>")
    pdf, message = report.export_pdf(html, tmp_path / "r.pdf")
    assert pdf is None and "is not an executable file" in message and str(tmp_path) in message


def test_run_all_with_parameters_is_refused_in_one_line(capsys):
    assert main(["run", "--all", "-p", "n_points=3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not allowed with --all" in err[0]


def test_malformed_parameter_yaml_is_one_clean_error(root):
    with pytest.raises(InputError, match="not valid YAML"):
        run_study("tiny", overrides={"n_points": "[1, 2"}, root=root, out_root=root / "reports")


def test_cli_refuses_a_folder_with_foreign_files_before_running(tmp_path, capsys):
    out = tmp_path / "reports"
    (out / "quantization").mkdir(parents=True)
    (out / "quantization" / "notes.txt").write_text("mine")
    assert main(["run", "quantization", "--smoke", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "notes.txt" in err[0] and "--force" in err[0]
    assert (out / "quantization" / "notes.txt").read_text() == "mine"


def test_a_run_folder_takes_the_umask_s_mode(tmp_path):
    """A study's folder is readable as the user's umask says (mkdtemp made it 0700, so a web
    server or another user could open the index but none of the reports it links)."""
    import os
    from workbench.safe_output import private_folder
    mask = os.umask(0o022)
    try:
        folder = private_folder(tmp_path, "study")
    finally:
        os.umask(mask)
    assert (folder.stat().st_mode & 0o777) == 0o755


def test_rerender_does_not_adopt_a_file_the_user_added(root, no_pdf):
    """A report rendered again records the files it wrote, not everything in the folder: a
    user's note added to the folder stays foreign, so the next run refuses to replace it
    without --force (it had been adopted into the manifest and then deleted)."""
    from workbench.studies import rerender
    out = root / "reports"
    run_study("tiny", smoke=True, root=root, out_root=out)
    note = out / "tiny" / "my_notes.txt"
    note.write_text("keep me")
    rerender("tiny", out_root=out, root=root)
    assert foreign_files(out / "tiny") == ["my_notes.txt"]
    assert "tiny.html" in json.loads((out / "tiny" / MANIFEST).read_text())["files"]
    with pytest.raises(InputError, match="my_notes.txt"):
        run_study("tiny", smoke=True, root=root, out_root=out)
    assert note.read_text() == "keep me"
