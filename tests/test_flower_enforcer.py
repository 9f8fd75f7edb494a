"""The ServerApp quotes each private site's own ledger ε beside its count (in-memory grid).

In an honest run they agree exactly; a reply the server never got (lost) was still counted
by the site, so the site's figure is the larger one, and it is the site's ledger on disk.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("flwr")
pytest.importorskip("dp_accounting")

from sklearn.tree import DecisionTreeClassifier

from cotrain.flower.server_app import FlowerCoTraining
from cotrain.flower.site import load_site, write_site
from cotrain.flower.site_state import open_site_ledger
from cotrain.privacy import SubsampleAndAggregate
from tests.test_flower_strategy import InMemoryGrid, task_identity  # noqa: F401 (fixture)

MECH = SubsampleAndAggregate(n_teachers=3, sigma=20.0)


@pytest.fixture
def sites(tmp_path):
    rng = np.random.default_rng(1)
    U = rng.normal(size=(20, 2))
    np.save(tmp_path / "public.npy", U)
    paths = []
    for i in range(3):
        y = np.arange(60) % 2
        X = rng.normal(size=(60, 2)) + 2.0 * y[:, None]
        tree = DecisionTreeClassifier(max_depth=3)
        paths.append(write_site(tmp_path / f"site-{i}", X, y, U, tree, client_id=i, privacy=MECH,
                                classes=[0, 1]))  # fmt: skip
    return paths, tmp_path / "public.npy"


def _run(sites, grid, rounds=3):
    # a lost reply is waited for until round_timeout
    return FlowerCoTraining(sites[1], rounds=rounds, random_state=0, privacy=MECH, classes=[0, 1],
                            min_nodes=3, round_timeout=1.0).run(grid)  # fmt: skip


def test_an_honest_flower_run_agrees_with_every_sites_own_ledger(sites):
    flower = _run(sites, InMemoryGrid(sites[0]))
    report = flower.privacy_report()
    for entry, path in zip(report["clients"], sites[0], strict=True):
        assert entry["rounds"] == 3
        assert entry["site_epsilon"] == entry["epsilon"]
        assert open_site_ledger(load_site(path), 2).epsilon() == entry["site_epsilon"]


def test_a_lost_reply_is_counted_by_the_site_not_by_the_server(sites):
    grid = InMemoryGrid(sites[0])
    lost_node = list(grid.sites)[1]
    grid.lost = {lost_node: {2}}  # the site answers round 2; its reply never arrives
    flower = _run(sites, grid)
    entries = {e["client"]: e for e in flower.privacy_report()["clients"]}
    assert entries[1]["rounds"] == 2  # the server decoded two of its replies
    ledger = open_site_ledger(load_site(sites[0][1]), 2)
    assert ledger.releases == 3  # the site sent three
    assert entries[1]["site_epsilon"] == ledger.epsilon() > entries[1]["epsilon"]
    assert entries[0]["site_epsilon"] == entries[0]["epsilon"]
