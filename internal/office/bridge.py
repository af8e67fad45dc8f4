# bridge.py: outprint's UNO client for one warm LibreOffice process.
#
# outprint (internal/office) embeds this script and runs it with Debian's
# python3 (python3-uno). The Go side speaks JSON lines on stdin/stdout:
#
#   in : {"soffice": ..., "profile": "file:///...", "pipe": "name",
#         "warm": URL of a scratch PDF, "cpu": N or -1}   (once)
#   out: {"ready": true, "pid": N}   once soffice answers over the pipe
#   in : {"in": URL, "out": URL, "filter": "", "options": "",
#         "paper": [w, h] | null, "landscape": true | false | null,
#         "maxPages": N}
#   out: {"ok": true} or {"error": "load" | "export" | "internal", "message": ...}
#
# The script starts soffice itself, after the Go side has set this
# process's rlimits and nice value, so soffice and everything it forks
# inherit them, its process group and its namespaces. It never runs a
# shell command per document: every document goes through the one UNO
# connection. stdout carries answers only; soffice's output goes to stderr.
import json
import os
import signal
import subprocess
import sys
import threading
import time

import uno
from com.sun.star.beans import PropertyValue
from com.sun.star.connection import NoConnectException
from com.sun.star.lang import DisposedException

# soffice.bin's exit status when it asks to be started again
# (EXITHELPER_NORMAL_RESTART).
RESTART = 81

# css.document.MacroExecMode.NEVER_EXECUTE, css.document.UpdateDocMode.NO_UPDATE
NEVER_EXECUTE = 0
NO_UPDATE = 0


def prop(name, value):
    p = PropertyValue()
    p.Name = name
    p.Value = value
    return p


def answer(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def start(cfg):
    if cfg.get("cpu", -1) >= 0:
        # The whole group keeps to one CPU (soffice inherits it): two
        # groups left to the scheduler were moved between the cores.
        try:
            os.sched_setaffinity(0, {cfg["cpu"]})
        except OSError as e:
            sys.stderr.write("cpu %d: %s\n" % (cfg["cpu"], e))
    argv = [
        cfg["soffice"], "--headless", "--invisible", "--nologo", "--norestore",
        "--nodefault", "--nolockcheck", "--nofirststartwizard",
        "-env:UserInstallation=" + cfg["profile"],
        "--accept=pipe,name=%s;urp;StarOffice.ComponentContext" % cfg["pipe"],
    ]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=sys.stderr)
    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
    url = "uno:pipe,name=%s;urp;StarOffice.ComponentContext" % cfg["pipe"]
    restarts = 0
    while True:
        try:
            ctx = resolver.resolve(url)
            break
        except NoConnectException:
            if proc.poll() is not None:
                # soffice.bin asks to be started again after its first
                # start on a new profile (what oosplash, the launcher
                # outprint does not use, does for it).
                if proc.returncode == RESTART and restarts < 3:
                    restarts += 1
                    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=sys.stderr)
                    continue
                raise RuntimeError("soffice exited with status %d before it answered" % proc.returncode)
            # The Go side bounds the start: it kills the group.
            time.sleep(0.02)
    desktop = ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)
    return proc, desktop


def broken(e):
    """Whether an exception says the connection to soffice is gone (it
    died): that is no answer about the document."""
    return isinstance(e, DisposedException) or "disposed" in str(e).lower()


def set_pages(doc, paper, landscape):
    """Sets the paper and orientation of every page style (Writer, Calc)."""
    families = doc.getStyleFamilies()
    if not families.hasByName("PageStyles"):
        return
    styles = families.getByName("PageStyles")
    for name in styles.getElementNames():
        st = styles.getByName(name)
        w, h = st.Width, st.Height
        if paper is not None:
            w, h = paper[0], paper[1]
            if st.IsLandscape:
                w, h = h, w
        if landscape is not None:
            if landscape != (w > h):
                w, h = h, w
            st.IsLandscape = landscape
        st.Width, st.Height = w, h


def export_filter(doc):
    if doc.supportsService("com.sun.star.sheet.SpreadsheetDocument"):
        return "calc_pdf_Export", True
    if doc.supportsService("com.sun.star.presentation.PresentationDocument"):
        return "impress_pdf_Export", False
    if doc.supportsService("com.sun.star.drawing.DrawingDocument"):
        return "draw_pdf_Export", False
    return "writer_pdf_Export", True


def convert(desktop, req):
    props = [
        prop("Hidden", True), prop("ReadOnly", True),
        prop("MacroExecutionMode", NEVER_EXECUTE), prop("UpdateDocMode", NO_UPDATE),
        prop("RepairPackage", False), prop("Silent", True),
    ]
    if req.get("filter"):
        props.append(prop("FilterName", req["filter"]))
    if req.get("options"):
        props.append(prop("FilterOptions", req["options"]))
    try:
        doc = desktop.loadComponentFromURL(req["in"], "_blank", 0, tuple(props))
    except Exception as e:  # IOException, IllegalArgumentException, ...
        if broken(e):
            raise
        return {"error": "load", "message": str(e)[:300]}
    if doc is None:
        return {"error": "load", "message": "no document"}
    try:
        name, pages = export_filter(doc)
        if pages and (req.get("paper") is not None or req.get("landscape") is not None):
            set_pages(doc, req.get("paper"), req.get("landscape"))
        data = uno.Any("[]com.sun.star.beans.PropertyValue", tuple([
            # One page past the bound: the Go side counts the pages and
            # refuses a PDF that reached it, without exporting the rest.
            prop("PageRange", "1-%d" % (req["maxPages"] + 1)),
        ]))
        try:
            # uno.invoke keeps FilterData a sequence of PropertyValue (a
            # plain call would pass it as a sequence of any).
            uno.invoke(doc, "storeToURL", (req["out"], (prop("FilterName", name), prop("FilterData", data))))
        except Exception as e:
            if broken(e):
                raise
            return {"error": "export", "message": str(e)[:300]}
        return {"ok": True}
    finally:
        try:
            doc.close(True)
        except Exception:
            try:
                doc.dispose()
            except Exception:
                pass


def warm(desktop, out):
    """Loads each application and the PDF export once, so that the first
    document a process converts does not pay for loading their libraries."""
    for factory in ("swriter", "scalc", "simpress"):
        try:
            doc = desktop.loadComponentFromURL("private:factory/" + factory, "_blank", 0, (prop("Hidden", True),))
            name, _ = export_filter(doc)
            uno.invoke(doc, "storeToURL", (out, (prop("FilterName", name),)))
            doc.close(True)
        except Exception as e:
            sys.stderr.write("warm %s: %s\n" % (factory, e))
    try:
        os.remove(uno.fileUrlToSystemPath(out))
    except OSError:
        pass


def watch_parent(fd):
    """Kills this process's group (this bridge, soffice.bin and anything
    they forked) once fd reaches its end: the Go side holds
    the pipe's only write end, and the kernel closes it however outprint
    ends, SIGKILL included. A thread blocked in read runs even while the
    main thread waits inside a UNO call. A parent-death signal on the
    bridge alone would leave soffice.bin, the bridge's child, running."""
    def run():
        try:
            while os.read(fd, 64):
                pass
        except OSError:
            pass
        os.killpg(0, signal.SIGKILL)
    threading.Thread(target=run, daemon=True).start()


def main():
    if len(sys.argv) > 1:
        watch_parent(int(sys.argv[1]))
    cfg = json.loads(sys.stdin.readline())
    proc, desktop = start(cfg)
    if cfg.get("warm"):
        warm(desktop, cfg["warm"])
    answer({"ready": True, "pid": proc.pid})
    for line in sys.stdin:
        req = json.loads(line)
        try:
            res = convert(desktop, req)
        except Exception as e:
            # The connection broke (soffice died) or UNO failed: the Go
            # side replaces this process.
            try:
                status = proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                status = "still running"
            answer({"error": "internal", "message": "%s (soffice: %s)" % (str(e)[:300], status)})
            sys.exit(1)
        answer(res)
    # stdin ended: the Go side let this process go. Nothing of it may
    # outlive the bridge.
    os.killpg(0, signal.SIGKILL)


if __name__ == "__main__":
    main()
