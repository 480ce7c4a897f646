"""The architecture the design states (../shared/DESIGN.md): specs are data and import
nothing of the package but units and errors; primitives take numbers, never spec objects,
so no primitive imports specs. Read from the import graph with ast."""
from __future__ import annotations

import ast
from pathlib import Path

import workbench

PACKAGE = Path(workbench.__file__).parent


def _imports(path: Path) -> set[str]:
    """Absolute names of the workbench modules `path` imports (relative imports resolved)."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module
    if path.name == "__init__.py":
        package = module.removesuffix(".__init__")
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("workbench")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name.startswith("workbench"):
                out.add(name)
                out |= {f"{name}.{a.name}" for a in node.names}
    return out


def _modules(sub: str):
    return sorted((PACKAGE / sub).rglob("*.py"))


def test_the_import_reader_sees_relative_imports():
    names = _imports(PACKAGE / "primitives" / "gemm.py")
    assert "workbench.primitives.hardware_numbers" in names


def test_no_primitive_imports_specs():
    offenders = {p.name: sorted(n for n in _imports(p) if n.startswith("workbench.specs"))
                 for p in _modules("primitives")}
    assert not {k: v for k, v in offenders.items() if v}, offenders


def test_specs_import_only_units_and_errors():
    allowed = ("workbench.units", "workbench.errors", "workbench.specs")
    offenders = {p.name: sorted(n for n in _imports(p) if not n.startswith(allowed)) for p in _modules("specs")}
    assert not {k: v for k, v in offenders.items() if v}, offenders


def test_predict_does_not_branch_on_the_hardware_kind():
    """predict checks and dispatches: no is_wafer, no spec-class tests in it."""
    text = (PACKAGE / "predict.py").read_text()
    for word in ("is_wafer", "WaferSpec", "SystemSpec", "HardwareSpec", "isinstance(hw"):
        assert word not in text, word


def test_no_module_is_a_god_file():
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    assert max(sizes.values()) <= 520, sorted(sizes.items(), key=lambda kv: -kv[1])[:3]


def test_modes_are_checked_where_they_are_used():
    """An unknown mapping, kernel, dtype or recompute mode raises in the primitive or
    workload itself; it never falls through an `else` into another mode."""
    import pytest

    from workbench.backends import numbers
    from workbench.errors import InputError
    from workbench.primitives.attention import attention_prefill
    from workbench.primitives.gemm import gemm
    from workbench.primitives.mesh import kv_capacity_tokens, line_allreduce, mesh_gemm
    w, g = numbers("wse3"), numbers("h100_sxm")
    with pytest.raises(InputError, match="mapping='torus'"):
        line_allreduce(w, P=8.0, nbytes=64.0, mapping="torus")
    with pytest.raises(InputError, match="mapping"):
        mesh_gemm(w, P=8.0, m=8.0, k=8.0, n=8.0, mapping="Mesh")
    with pytest.raises(InputError, match="mapping"):
        kv_capacity_tokens(free_bytes_per_pe=1e4, P=8.0, kv_bytes_per_token_per_layer=512.0, mapping="")
    with pytest.raises(InputError, match="kernel='flash4'"):
        attention_prefill(hw=g, batch=1.0, seq_len=128.0, n_heads=8.0, head_dim=64.0, kernel="flash4")
    with pytest.raises(InputError, match="dtype='e4m3'"):
        gemm(hw=g, m=8.0, n=8.0, k=8.0, dtype="e4m3")
