#!/usr/bin/env python3
"""The daemon under the hostile cases of its wire, as one JSON line.

Against the daemon at $GRADD_DAEMON (pid DAEMON_PID): four 32-byte BASP
client_handshake headers, four frame headers declaring 4 GiB, then 300
connections that never say anything, opened while gradd-daemon-rtt (a
client connected before them) measures its round trip. Reports the
daemon's resident memory before, during and after, how many of the bad
connections it closed, the connected client's round trip meanwhile, and
how long a new client (gradd status) waits to be served while the idle
connections fill the handshake's slots.

  bench/daemon_hostile.py DAEMON_PID BUILD_DIR
"""

import json
import os
import socket
import subprocess
import sys
import time


def resident_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def closed_within(sock, seconds):
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
        return True
    except socket.timeout:
        return False
    except OSError:
        return True


def main():
    pid, build = int(sys.argv[1]), sys.argv[2]
    host, port = os.environ["GRADD_DAEMON"].rsplit(":", 1)
    address = (host, int(port))
    before = resident_kib(pid)

    closed = 0
    for payload in [b"\x01" + b"\x00" * 31] * 4 + [b"\xff\xff\xff\xff\x02" + b"\x00" * 8] * 4:
        sock = socket.create_connection(address)
        sock.sendall(payload)
        closed += closed_within(sock, 2.0)
        sock.close()

    rtt_run = subprocess.Popen([f"{build}/gradd-daemon-rtt", "10000"], stdout=subprocess.PIPE,
                               text=True)
    time.sleep(0.5)  # connected and welcomed
    idle = [socket.create_connection(address) for _ in range(300)]
    time.sleep(0.2)
    during = resident_kib(pid)
    start = time.monotonic()
    while subprocess.run([f"{build}/gradd", "status"], capture_output=True).returncode != 0:
        time.sleep(0.05)
    new_client_wait = time.monotonic() - start
    rtt = json.loads(rtt_run.communicate()[0])
    idle_closed = sum(closed_within(sock, 4.0) for sock in idle)
    for sock in idle:
        sock.close()
    after = resident_kib(pid)
    print(json.dumps({"bench": "hostile", "resident_kib_before": before,
                      "resident_kib_with_300_idle": during, "resident_kib_after": after,
                      "bad_headers_closed": f"{closed} of 8",
                      "idle_closed": f"{idle_closed} of 300",
                      "rtt_median_us_with_300_idle": rtt["median_us"],
                      "rtt_p99_us_with_300_idle": rtt["p99_us"],
                      "new_client_served_after_s": round(new_client_wait, 2),
                      "alive": os.path.exists(f"/proc/{pid}")}))


if __name__ == "__main__":
    main()
