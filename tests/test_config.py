"""params.yaml validation: every bad value is an error naming its key and the allowed range."""

from __future__ import annotations

import copy
import itertools
import math

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, tiny_params
from veilbench.config import ConfigError, MetricRef, load_config, validate_config

#: Every params file the repository ships (relative to its root): the default, larger and paper runs
#: and the runs kept beside their reports.
SHIPPED_PARAMS = sorted(str(p.relative_to(REPO)) for p in [*REPO.glob("params*.yaml"), *REPO.glob("reports/**/params.yaml")])


def _with(path: str, value: object, **sweep_keys: object) -> dict:
    """``tiny_params()`` with ``value`` at the dotted ``path`` (and ``sweep_keys`` set on sweep ``ss``)."""
    params = copy.deepcopy(tiny_params())
    node = params
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    params["sweeps"]["ss"].update(sweep_keys)
    return params


def test_tiny_params_are_valid() -> None:
    cfg = validate_config(tiny_params())
    assert list(cfg.sweeps["ss"].expand()) == ["epsilon=4.0", "epsilon=8.0", "mechanism=clean"]
    assert cfg.family_params("ss", "epsilon=8.0").epsilon == 8.0
    assert cfg.family_params("ss", "mechanism=clean").mechanism == "clean"
    assert list(cfg.sweeps["ss-identity"].expand()) == ["default"]


def test_grid_is_a_cartesian_product_over_shared_params() -> None:
    params = _with("sweeps.ss.grid", {"epsilon": [1.0, 2.0], "calibrator": ["analytic", "conservative"]})
    cells = validate_config(params).sweeps["ss"].expand()
    assert len(cells) == 4 + 1
    assert cells["calibrator=conservative_epsilon=2.0"] == {
        "mechanism": "gaussian", "delta": 1e-5, "n_queries": 30, "audit_releases": 400,
        "epsilon": 2.0, "calibrator": "conservative"}


def _keys_in_order(mapping: dict, order: tuple[str, ...]) -> dict:
    """``mapping`` with its keys inserted in ``order`` (the keys ``order`` omits last, as they were)."""
    return {**{k: mapping[k] for k in order if k in mapping}, **{k: v for k, v in mapping.items() if k not in order}}


#: (label, the sweep's grid, its explicit cells, a name the expansion must hold): each is expanded
#: with the grid's axes and every explicit cell's keys in every order.
KEY_ORDER = [
    ("two axes", {"epsilon": [1.0, 2.0], "calibrator": ["analytic", "conservative"]}, [],
     "calibrator=conservative_epsilon=2.0"),
    ("three axes and explicit cells",
     {"n_queries": [10, 20], "epsilon": [1.0, 2.0], "calibrator": ["analytic", "conservative"]},
     [{"mechanism": "clean", "n_queries": 10}, {"mechanism": "gaussian", "epsilon": 3.0, "calibrator": "analytic"}],
     "calibrator=analytic_epsilon=3.0_mechanism=gaussian"),
    ("explicit cells only", {}, [{"mechanism": "gaussian", "epsilon": 3.0, "n_queries": 12, "delta": 1e-6}],
     "delta=1e-06_epsilon=3.0_mechanism=gaussian_n_queries=12"),
]


@pytest.mark.parametrize("label,grid,cells,expected", KEY_ORDER, ids=[k[0] for k in KEY_ORDER])
def test_cell_names_and_options_do_not_depend_on_key_order(label: str, grid: dict, cells: list, expected: str) -> None:
    """Every order of the grid's axes and of each explicit cell's keys expands to the same cell names
    with the same options (only the listing order may follow the YAML)."""
    keys = sorted({*grid, *(k for c in cells for k in c)})
    expansions = []
    for order in itertools.permutations(keys):
        params = _with("sweeps.ss.grid", _keys_in_order(grid, order), cells=[_keys_in_order(c, order) for c in cells])
        expansions.append(validate_config(params).sweeps["ss"].expand())
    first = expansions[0]
    assert expected in first, sorted(first)
    assert len(first) == math.prod(len(v) for v in grid.values()) * bool(grid) + len(cells)
    for other in expansions[1:]:
        assert sorted(other) == sorted(first)
        assert other == first  # the same options under each name


def test_shipped_sweeps_keep_their_cell_names_when_keys_are_reversed() -> None:
    """Each shipped params file, with every grid's axes and every explicit cell's keys reversed,
    expands to the same cells (names and options) as written."""
    from veilbench import strict_yaml

    assert {"params.yaml", "params.large.yaml", "params.paper.yaml"} <= set(SHIPPED_PARAMS)
    for name in SHIPPED_PARAMS:
        raw = strict_yaml.loads((REPO / name).read_bytes(), name)
        reversed_raw = copy.deepcopy(raw)
        for sweep in reversed_raw["sweeps"].values():
            sweep["grid"] = dict(reversed(list(sweep.get("grid", {}).items())))
            sweep["cells"] = [dict(reversed(list(c.items()))) for c in sweep.get("cells", [])]
        written, flipped = validate_config(raw), validate_config(reversed_raw)
        for sweep, cfg in written.sweeps.items():
            assert flipped.sweeps[sweep].expand() == cfg.expand(), f"{name}: sweep {sweep}"


BAD = [
    ("unknown top-level key", _with("colour", "blue"), "colour", "unknown key"),
    ("unknown dataset key", _with("datasets.digits.n_partys", 2), "datasets.digits.n_partys", "unknown key"),
    ("unknown cell param", _with("sweeps.ss.params.epsilom", 1.0), "sweeps.ss.params.epsilom", "unknown key"),
    ("epsilon zero", _with("sweeps.ss.grid", {"epsilon": [0.0]}), "sweeps.ss.grid.epsilon", "greater than 0"),
    ("epsilon negative", _with("sweeps.ss.grid", {"epsilon": [1.0, -1.0]}), "sweeps.ss.grid.epsilon", "greater than 0"),
    ("delta one", _with("sweeps.ss.params.delta", 1.0), "sweeps.ss.params.delta", "less than 1"),
    ("delta zero", _with("sweeps.ss.params.delta", 0.0), "sweeps.ss.params.delta", "greater than 0"),
    ("negative sensitivity", _with("sweeps.ss.params.sensitivity", -2.0), "sweeps.ss.params.sensitivity", "greater than 0"),
    ("epsilon wrong type", _with("sweeps.ss.grid", {"epsilon": ["lots"]}), "sweeps.ss.grid.epsilon", "number"),
    ("empty grid axis", _with("sweeps.ss.grid", {"epsilon": []}), "sweeps.ss.grid", "has no values"),
    ("repeated grid value", _with("sweeps.ss.grid", {"epsilon": [1.0, 1.0]}), "sweeps.ss.grid", "repeats a value"),
    ("duplicate explicit cells", _with("sweeps.ss.cells", [{"mechanism": "clean"}, {"mechanism": "clean"}]), "sweeps.ss", "same configuration"),
    ("test_size out of range", _with("datasets.digits.test_size", 1.5), "datasets.digits.test_size", "less than 1"),
    ("zero parties", _with("datasets.digits.n_parties", 0), "datasets.digits.n_parties", "greater than or equal to 1"),
    ("more parties than records", _with("datasets.digits.n_parties", 500), "datasets.digits.n_parties", "more parties"),
    ("unknown dataset source", _with("datasets.digits.source", "imagenet"), "datasets.digits.source", "must be one of"),
    ("unknown encoder", _with("embeddings.digits-pca.encoder", "bert"), "embeddings.digits-pca.encoder", "Input should be"),
    ("dim zero", _with("embeddings.digits-pca.dim", 0), "embeddings.digits-pca.dim", "greater than or equal to 1"),
    ("unknown family", _with("sweeps.ss.family", "magic"), "sweeps.ss.family", "must be one of"),
    ("dangling embedding", _with("sweeps.ss.embedding", "nope"), "sweeps.ss.embedding", "not in embeddings"),
    ("dangling dataset", _with("embeddings.digits-pca.dataset", "nope"), "embeddings.digits-pca.dataset", "not in datasets"),
    ("duplicate seeds", _with("sweeps.ss.seeds", [1, 1]), "sweeps.ss.seeds", "distinct"),
    ("empty seeds", _with("sweeps.ss.seeds", []), "sweeps.ss.seeds", "at least 1"),
    ("unknown mechanism", _with("sweeps.ss-identity.params.mechanism", "laplace"), "sweeps.ss-identity.params.mechanism", "Input should be"),
    ("bad sweep name", {**tiny_params(), "sweeps": {"a b": tiny_params()["sweeps"]["ss"]}}, "sweeps.a b", "letters, digits"),
    ("explicit cells equal up to key order",
     _with("sweeps.ss.cells", [{"mechanism": "clean", "epsilon": 2.0}, {"epsilon": 2.0, "mechanism": "clean"}]),
     "sweeps.ss", "same configuration"),
    ("explicit cell equal to a grid cell up to key order",
     _with("sweeps.ss.grid", {"epsilon": [1.0, 2.0], "calibrator": ["analytic"]},
           cells=[{"calibrator": "analytic", "epsilon": 2.0}]),
     "sweeps.ss", "same configuration"),
]


@pytest.mark.parametrize("label,params,key,fragment", BAD, ids=[b[0] for b in BAD])
def test_bad_params_name_the_key(label: str, params: dict, key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate_config(params)
    message = str(err.value)
    assert key in message, message
    assert fragment in message, message


def test_top_level_must_be_mapping() -> None:
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        validate_config([1, 2])


def test_load_config_reports_yaml_syntax_and_missing_file(tmp_path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "absent.yaml")
    bad = tmp_path / "params.yaml"
    bad.write_text("datasets: {digits: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


@pytest.mark.parametrize("name", ["params.yaml", "params.large.yaml"])
def test_shipped_params_files_are_valid(name: str) -> None:
    from tests.conftest import REPO

    cfg = load_config(REPO / name)
    families = {s.family for s in cfg.sweeps.values()}
    assert families == {"scoreshield", "gca", "dc", "anchornoise"}, "every family runs in the shipped params"


@pytest.mark.parametrize("name", SHIPPED_PARAMS)
def test_every_cell_a_shipped_params_file_names_is_one_of_its_cells(name: str) -> None:
    """The claims and the data-free references of each shipped params file name existing cells."""
    cfg = load_config(REPO / name)
    named = [(f"report.claims.{i}", ref.sweep, ref.cell) for i, claim in enumerate(cfg.report.claims)
             for ref in (claim.ours, claim.than, *claim.data_free) if isinstance(ref, MetricRef)]
    named += [(f"report.data_free.{i}", entry.sweep, sel) for i, entry in enumerate(cfg.report.data_free)
              for sel in (*entry.references, *entry.exclude) if isinstance(sel, str)]
    for where, sweep, cell in named:
        assert cell in cfg.sweeps[sweep].expand(), f"{name}: {where}: {cell!r} is not a cell of {sweep!r}"


@settings(max_examples=60, deadline=None)
@given(eps=st.floats(allow_nan=True, allow_infinity=True), delta=st.floats(allow_nan=True, allow_infinity=True))
def test_privacy_parameters_accepted_iff_in_range(eps: float, delta: float) -> None:
    params = _with("sweeps.ss.grid", {"epsilon": [eps]})
    params["sweeps"]["ss"]["params"]["delta"] = delta
    ok = (eps > 0 and eps != float("inf")) and (0 < delta < 1)
    if ok:
        cfg = validate_config(params)
        assert cfg.family_params("ss", next(iter(cfg.sweeps["ss"].expand()))).epsilon == eps
    else:
        with pytest.raises(ConfigError):
            validate_config(params)


@settings(max_examples=40, deadline=None)
@given(data=st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                         lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
                         max_leaves=8))
def test_arbitrary_yaml_never_crashes_the_validator(data: object) -> None:
    """Any parsed YAML either validates or raises ConfigError — never another exception."""
    try:
        validate_config(data)
    except ConfigError:
        pass
    text = yaml.safe_dump(data)
    assert yaml.safe_load(text) == data


def test_load_config_is_memoised_on_the_text_and_returns_independent_copies(tmp_path) -> None:
    path = tmp_path / "params.yaml"
    params = tiny_params()
    path.write_text(yaml.safe_dump(params))
    first, second = load_config(path), load_config(path)
    assert first == second and first is not second
    assert first.sweeps is not second.sweeps  # deep copies: one caller cannot change another's config
    edited = copy.deepcopy(params)
    name = next(iter(edited["sweeps"]))
    edited["sweeps"][name]["seeds"] = [7]
    path.write_text(yaml.safe_dump(edited))
    assert load_config(path).sweeps[name].seeds == [7]  # a changed file is read and validated again
    path.write_text("sweeps: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)
