#!/usr/bin/env python3
"""scripts/check-topo-links.py on stored `nvidia-smi topo -m` outputs (tests/topo/nvidia-smi/):
its parser reads each matrix, and a mismatching memarea label is named with its pair."""
import importlib.util
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
spec = importlib.util.spec_from_file_location(
    "check_topo_links", os.path.join(ROOT, "scripts", "check-topo-links.py"))
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)


def stored(name):
    with open(os.path.join(HERE, "nvidia-smi", name)) as f:
        return f.read()


def topo(link, pci=None):
    n = len(link)
    pci = pci or [f"0000:{0x10 + d:02x}:00.0" for d in range(n)]
    return {"link": link, "devices": [{"ordinal": d, "pci_bus_id": pci[d]} for d in range(n)]}


class Parser(unittest.TestCase):
    def test_two_gpus_nv18_with_terminal_underline(self):
        self.assertEqual(check.parse_matrix(stored("h200-x2-nv18.txt")),
                         [["X", "NV18"], ["NV18", "X"]])

    def test_four_gpus_nvswitch(self):
        m = check.parse_matrix(stored("h100-x4-nvswitch.txt"))
        self.assertEqual(len(m), 4)
        for a in range(4):
            for b in range(4):
                self.assertEqual(m[a][b], "X" if a == b else "NV18")

    def test_nic_columns_and_rows_are_ignored(self):
        text = ("\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n"
                "GPU0\t X \tNV12\tSYS\t0-51\t0\n"
                "GPU1\tNV12\t X \tSYS\t0-51\t0\n"
                "NIC0\tSYS\tSYS\t X \t\t\n\nLegend:\n\n  X    = Self\n")
        self.assertEqual(check.parse_matrix(text), [["X", "NV12"], ["NV12", "X"]])

    def test_pcie_box(self):
        self.assertEqual(check.parse_matrix(stored("pcie-x4-phb-sys.txt")),
                         [["X", "PHB", "SYS", "SYS"], ["PHB", "X", "SYS", "SYS"],
                          ["SYS", "SYS", "X", "PIX"], ["SYS", "SYS", "PIX", "X"]])

    def test_no_matrix_is_an_error(self):
        with self.assertRaises(ValueError):
            check.parse_matrix("NVIDIA-SMI has failed\n")


class Compare(unittest.TestCase):
    def test_the_issue_four_nvswitch_gpus_labelled_phb_fail_on_every_pair(self):
        # memarea topo's links on the 4x H100 NVSwitch machine before the P2P status was asked.
        smi = check.parse_matrix(stored("h100-x4-nvswitch.txt"))
        before = json.loads(stored("h100-x4-memarea-phb.json"))
        bad = check.compare(smi, before, check.parse_map(stored("h100-x4-map.csv")))
        self.assertEqual(len(bad), 12)
        self.assertIn((0, 3, "PHB", "NV18"), bad)

    def test_matching_labels_pass(self):
        smi = check.parse_matrix(stored("h100-x4-nvswitch.txt"))
        nv = [["-" if a == b else "NV18" for b in range(4)] for a in range(4)]
        self.assertEqual(check.compare(smi, topo(nv)), [])

    def test_pairs_are_matched_by_pci_bus_id(self):
        smi = check.parse_matrix(stored("pcie-x4-phb-sys.txt"))
        smi_map = check.parse_map(stored("pcie-x4-map.csv"))
        # memarea's ordinals in another order than nvidia-smi's (CUDA's fastest-first order).
        pci = ["0000:52:00.0", "0000:61:00.0", "0000:1b:00.0", "0000:43:00.0"]
        link = [["-", "PIX", "SYS", "SYS"], ["PIX", "-", "SYS", "SYS"],
                ["SYS", "SYS", "-", "PHB"], ["SYS", "SYS", "PHB", "-"]]
        self.assertEqual(check.compare(smi, topo(link, pci), smi_map), [])
        link[2][3] = "NODE"
        self.assertEqual(check.compare(smi, topo(link, pci), smi_map), [(2, 3, "NODE", "PHB")])

    def test_main_names_every_differing_pair_and_fails(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "topo.json")
            link = [["-", "NV18"], ["PHB", "-"]]
            with open(path, "w") as f:
                json.dump(topo(link), f)
            out = io.StringIO()
            with redirect_stdout(out):
                rc = check.main(["--json", path, "--smi",
                                 os.path.join(HERE, "nvidia-smi", "h200-x2-nv18.txt")])
            self.assertEqual(rc, 1)
            self.assertIn("MISMATCH 1 -> 0: memarea topo says 'PHB', nvidia-smi topo -m says "
                          "'NV18'", out.getvalue())
            self.assertNotIn("0 -> 1", out.getvalue())
            link[1][0] = "NV18"
            with open(path, "w") as f:
                json.dump(topo(link), f)
            with redirect_stdout(io.StringIO()):
                rc = check.main(["--json", path, "--smi",
                                 os.path.join(HERE, "nvidia-smi", "h200-x2-nv18.txt")])
            self.assertEqual(rc, 0)


class Capacity(unittest.TestCase):
    def test_a_zero_capacity_and_an_above_verdict_are_named(self):
        # memarea topo on a VM whose NVML named the NVLinks but not their speed, before the
        # capacity became unknown instead of 0.
        t = topo([["-", "NV18"], ["NV18", "-"]])
        t["peer_capacity_gbps"] = [0.0, 0.0]
        above = "ABOVE the links' capacity (inf% of 0.0 GB/s): the copies did not run at once"
        t["all_pairs"] = {"devices": [{"device": d, "egress_verdict": above,
                                       "ingress_verdict": above} for d in range(2)]}
        problems = check.capacity_problems(t)
        self.assertEqual(len(problems), 6)
        self.assertIn("device 1: peer capacity 0.0 GB/s (unknown must be null)", problems)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "topo.json")
            with open(path, "w") as f:
                json.dump(t, f)
            out = io.StringIO()
            with redirect_stdout(out):
                rc = check.main(["--json", path, "--smi",
                                 os.path.join(HERE, "nvidia-smi", "h200-x2-nv18.txt")])
            self.assertEqual(rc, 1)
            self.assertIn("CAPACITY device 0: egress ABOVE", out.getvalue())
            self.assertIn("all 2 ordered pairs match", out.getvalue())

    def test_unknown_and_within_capacities_pass(self):
        t = topo([["-", "NV18"], ["NV18", "-"]])
        t["peer_capacity_gbps"] = [None, 450.0]
        t["all_pairs"] = {"devices": [
            {"device": 0, "egress_verdict": "no nominal capacity (the links' speeds are not "
                                            "known)", "ingress_verdict": "no nominal capacity"},
            {"device": 1, "egress_verdict": "within the links' capacity (85% of 450.0 GB/s)",
             "ingress_verdict": "within the links' capacity (85% of 450.0 GB/s)"}]}
        self.assertEqual(check.capacity_problems(t), [])
        self.assertEqual(check.capacity_problems(topo([["-", "PHB"], ["PHB", "-"]])), [])
        one = topo([["-"]])
        one["peer_capacity_gbps"] = [0.0]  # one GPU: no peer, nothing to reach
        self.assertEqual(check.capacity_problems(one), [])


if __name__ == "__main__":
    unittest.main()
