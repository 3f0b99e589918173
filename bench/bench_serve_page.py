"""x-serve's page (GET /) in a headless Chromium: how long from opening the page to the label shown, and
the screenshot of README.md (docs/img/serve_page.png).

    python bench/bench_serve_page.py RUN [--text 这家酒店的服务很好] [--repeats 5] [--screenshot docs/img/serve_page.png]

It starts ``x-serve RUN --port 0 --cpu --threads 1`` and waits for it, then, ``--repeats`` times, opens a new
tab at GET /, types the text, submits it and waits for the label: the first time is the server's first
prediction (a cold model), the others a warm server and a fresh page each. Each time is split into the page's
load (navigation start to its ``load`` event) and its first answer (click to label shown, measured by the page
itself: ``performance.now()`` around POST /predict and its drawing). POST /explain's shading, which the page asks
for after the label is shown, is in neither figure. Needs Debian's ``chromium`` (or
XDPX_CHROMIUM) and ``pip install playwright``; no browser is downloaded.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            found = re.search(r"^model name\s*:\s*(.+)$", f.read(), re.M)
        return found.group(1) if found else platform.machine()
    except OSError:
        return platform.processor() or platform.machine()


def start_server(run: str) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen([sys.executable, "-c", "from xdpx.cli import x_serve; x_serve()", run, "--port", "0",
                                "--cpu", "--threads", "1"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True, env=env)
    found = re.search(r"http://[\d.]+:\d+", process.stdout.readline())
    if not found:
        process.kill()
        sys.exit(f"x-serve {run} did not start")
    return process, found.group(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="a run directory of x-train (or an ONNX export) that x-serve serves")
    parser.add_argument("--text", default="这家酒店的服务很好，房间也干净，下次还会再来", help="the text typed")
    parser.add_argument("--second", default=None, help="the second text (a pair run)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--screenshot", default=None, help="save the first page's screenshot here (PNG)")
    parser.add_argument("--width", type=int, default=1000)
    parser.add_argument("--height", type=int, default=720)
    options = parser.parse_args()
    executable = os.environ.get("XDPX_CHROMIUM") or shutil.which("chromium")
    if not executable:
        sys.exit("no chromium on the PATH: apt-get install -y chromium (or set XDPX_CHROMIUM)")
    from playwright.sync_api import sync_playwright  # lazy: optional package, after the chromium check

    started = time.perf_counter()
    process, address = start_server(options.run)
    print(f"x-serve up in {time.perf_counter() - started:.1f} s at {address}; CPU: {cpu_name()}, "
          f"{os.cpu_count()} logical CPUs, load average {os.getloadavg()[0]:.2f}")
    rows = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
            for repeat in range(options.repeats):
                tab = browser.new_page(viewport={"width": options.width, "height": options.height})
                opened = time.perf_counter()
                tab.goto(address + "/", wait_until="load")
                loaded = time.perf_counter()
                tab.fill("#text1", options.text)
                if options.second is not None:
                    tab.fill("#text2", options.second)
                tab.click("#submit")
                tab.wait_for_selector("#result:not([hidden]), #error:not([hidden])")
                shown = time.perf_counter()
                tab.wait_for_selector("body[data-state]")  # the extras too (/explain's shading), for the screenshot
                if tab.get_attribute("body", "data-state") != "answered":
                    sys.exit(f"the page showed an error: {tab.text_content('#error')}")
                answer = tab.text_content("#answer")
                own = int(re.search(r"(\d+) ms", tab.text_content("#status")).group(1))
                rows.append((1000 * (loaded - opened), 1000 * (shown - loaded), own, 1000 * (shown - opened)))
                if repeat == 0 and options.screenshot:
                    tab.screenshot(path=options.screenshot, full_page=True)
                tab.close()
            browser.close()
    finally:
        process.terminate()
        process.wait(timeout=60)
    print(f"answer: {answer}")
    print("| page | load ms | fill, submit, label shown ms | of which the page's own POST /predict + drawing ms | open to label ms |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for i, (load, answered, own, total) in enumerate(rows):
        print(f"| {'first (cold server)' if i == 0 else f'{i + 1}'} | {load:.0f} | {answered:.0f} | {own} | {total:.0f} |")
    if len(rows) > 1:
        warm = [r[3] for r in rows[1:]]
        print(f"warm pages: median {statistics.median(warm):.0f} ms from opening the page to the label shown")
    if options.screenshot:
        print(f"screenshot: {options.screenshot}")


if __name__ == "__main__":
    main()
