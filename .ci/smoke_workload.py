"""A tiny workload for the installed-package check of .ci/run: JOBS.json and
IN.pcap in the current directory (a few rounds of two workers, with drops),
made with the installed package alone. Usage: python smoke_workload.py N"""

import json
import sys

import netagg
from netagg import pcap
from netagg.frames import Endpoint, build_frame
from netagg.jobs import JobTable
from netagg.params import Params
from netagg.sim.traffic import random_traffic

PARAMS = dict(lanes=2, elements=4, workers=2, slots=4, jobs=1)
JOBS = {"jobs": [{"id": 0, "workers": 2, "slot_base": 0, "slots": 4}]}


def main() -> None:
    if "site-packages" not in netagg.__file__:
        sys.exit(f"netagg imported from {netagg.__file__}, not from an installed package")
    params = Params(**PARAMS)
    with open("jobs.json", "w") as f:
        json.dump(JOBS, f)
    switch = Endpoint(params.switch_mac_bytes, params.switch_ip_bytes, params.port)
    workers = [Endpoint.from_strings(f"02:00:00:00:01:0{w}", f"10.166.0.{10 + w}", 40000 + w)
               for w in range(params.workers)]
    msgs = random_traffic(params, JobTable.from_dict(JOBS, params), int(sys.argv[1]), seed=1)
    pcap.write("in.pcap", [build_frame(m, workers[i % len(workers)], switch)
                           for i, m in enumerate(msgs)])
    print(" ".join(f"--{k} {v}" for k, v in PARAMS.items()))


if __name__ == "__main__":
    main()
