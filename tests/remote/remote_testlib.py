"""A real object store for the remote tests: SeaweedFS (master, two volume
servers with replication 001, filer, S3 gateway with an identities file)
and nginx serving a directory over plain HTTP, all on 127.0.0.1 with free
ports, waited for with bounded timeouts and always stopped.

`weed` comes from tools/install-seaweedfs.sh (build-seaweedfs/bin/weed, or
$PTWMFS_WEED); without it the tests skip and say so.
"""
import http.client
import http.server
import json
import os
import shutil
import ssl
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

SOURCE_ROOT = os.environ.get("PTWMFS_SOURCE_ROOT",
                             os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# meson stops a test that runs over its time with SIGTERM: unwind, so that
# every `with` block stops its servers (they run in their own sessions).
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

ACCESS_KEY = "ptwmfs-test-key"
SECRET_KEY = "ptwmfs-test-secret-0123456789"
REGION = "us-east-1"


def weed_path():
    """The weed binary, or None (the caller skips with the message of weed_missing())."""
    for path in (os.environ.get("PTWMFS_WEED"), os.path.join(SOURCE_ROOT, "build-seaweedfs", "bin", "weed"),
                 shutil.which("weed")):
        if path and os.access(path, os.X_OK):
            return path
    return None


WEED_MISSING = ("SeaweedFS's weed is not built (bash tools/install-seaweedfs.sh builds it through "
                "the Go module proxy); skipping the object-store tests")


# Ports handed out by free_port in this process, gRPC partners included:
# a port is free when asked for, but the servers bind later, so a second
# call must not hand out the first one's gRPC port (a SeaweedFS S3 gateway
# once got a volume server's port + 10000 and failed to bind).
_handed_out = set()


def free_port(plus_grpc=False):
    """A free loopback port; with plus_grpc, port + 10000 (SeaweedFS's gRPC port) is free too.
    Never one handed out before, nor the gRPC partner of one."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        wanted = {port, port + 10000} if plus_grpc else {port}
        if wanted & _handed_out:
            continue
        if not plus_grpc:
            _handed_out.add(port)
            return port
        if port + 10000 >= 65536:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        _handed_out.update(wanted)
        return port
    raise RuntimeError("no free port pair on 127.0.0.1")


def wait_until(what, check, timeout=60, log=lambda: ""):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception as e:  # noqa: BLE001  (not up yet)
            last = e
        time.sleep(0.2)
    raise RuntimeError(f"{what} not ready after {timeout} s ({last})\n{log()}")


def http_get(url, timeout=5, context=None):
    with urllib.request.urlopen(url, timeout=timeout, context=context) as r:
        return r.read()


# Servers run in sessions of their own, which meson's kill of a test that
# ran over its time (SIGTERM to the test's process group, SIGKILL half a
# second later) does not reach, and the SIGTERM handler above cannot stop
# them when the test is blocked in a read of a mount or has no time left.
# Started under setpriv --pdeathsig, a server gets SIGTERM as soon as the
# test process dies, however it dies: none outlives its test. (The signal
# comes when the thread that started it ends: start servers from the main
# thread, as every test does.)
_SETPRIV = shutil.which("setpriv")


def bound_to_this_process(args):
    """args, run so that the process gets SIGTERM when this one dies."""
    return [_SETPRIV, "--pdeathsig", "TERM", "--", *args] if _SETPRIV else list(args)


def stop_session(proc, timeout=10):
    """SIGTERM to proc; after `timeout` s SIGKILL to its whole session (its
    own children too: an nginx master killed would leave its worker)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


class Process:
    def __init__(self, name, args, log_dir):
        self.name, self.args = name, args
        self.log_path = os.path.join(log_dir, name + ".log")
        self.proc = None

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(bound_to_this_process(self.args), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()

    def stop(self):
        if self.proc:
            stop_session(self.proc)
        self.proc = None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-3000:].decode(errors="replace")
        except OSError:
            return ""


class SeaweedFS:
    """`with SeaweedFS() as s3:` a running cluster; s3.endpoint, s3.env(),
    s3.make_bucket(name), s3.stop_gateway()/start_gateway(), s3.volumes[i].stop()."""

    def __init__(self, weed=None, ip="127.0.0.1", max_volumes=30):
        self.ip = ip
        self.max_volumes = max_volumes  # of 64 MB each, a volume server: 30 holds ~1.9 GB
        self.weed = weed or weed_path()
        if not self.weed:
            raise RuntimeError(WEED_MISSING)
        self.dir = tempfile.mkdtemp(prefix="ptwmfs-seaweed-")
        self.master_port = free_port(True)
        self.volume_ports = [free_port(True), free_port(True)]
        self.filer_port = free_port(True)
        self.s3_port = free_port(True)
        self.endpoint = f"http://{ip}:{self.s3_port}"
        self.processes = []
        self.volumes = []
        self.gateway = None

    def _logs(self):
        return "\n".join(f"--- {p.name}\n{p.log()}" for p in self.processes)

    def __enter__(self):
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self):
        d, weed, ip = self.dir, self.weed, self.ip
        config = {"identities": [{"name": "tests", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                                  "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}
        self.s3_config = os.path.join(d, "s3.json")
        with open(self.s3_config, "w") as f:
            json.dump(config, f)
        os.makedirs(os.path.join(d, "master"))
        master = Process("master", [weed, "master", f"-ip={ip}", f"-ip.bind={ip}", f"-port={self.master_port}",
                                    f"-mdir={d}/master", "-defaultReplication=001", "-volumeSizeLimitMB=64"], d)
        self.processes.append(master)
        master.start()
        wait_until("SeaweedFS master", lambda: http_get(f"http://{ip}:{self.master_port}/cluster/status"), 60,
                   self._logs)
        for i, port in enumerate(self.volume_ports):
            os.makedirs(f"{d}/volume{i}")
            v = Process(f"volume{i}", [weed, "volume", f"-ip={ip}", f"-ip.bind={ip}", f"-port={port}",
                                       f"-dir={d}/volume{i}", f"-mserver={ip}:{self.master_port}", f"-max={self.max_volumes}",
                                       "-dataCenter=dc1", "-rack=rack1"], d)
            self.processes.append(v)
            self.volumes.append(v)
            v.start()

        def both_volumes_registered():
            status = json.loads(http_get(f"http://{ip}:{self.master_port}/dir/status"))
            nodes = [n for dc in status["Topology"]["DataCenters"] for r in dc["Racks"] for n in r["DataNodes"]]
            return len(nodes) >= 2
        wait_until("SeaweedFS volume servers", both_volumes_registered, 60, self._logs)
        os.makedirs(f"{d}/filer")
        filer = Process("filer", [weed, "filer", f"-ip={ip}", f"-ip.bind={ip}", f"-port={self.filer_port}",
                                  f"-master={ip}:{self.master_port}", f"-defaultStoreDir={d}/filer"], d)
        self.processes.append(filer)
        filer.start()
        wait_until("SeaweedFS filer", lambda: http_get(f"http://{ip}:{self.filer_port}/") is not None, 60, self._logs)
        # Its Iceberg and Lance servers are off: they listen on fixed ports
        # (8181, 9101), which concurrent clusters (test suites run in
        # parallel) would fight over.
        self.gateway = Process("s3", [weed, "s3", f"-ip.bind={ip}", f"-port={self.s3_port}",
                                      "-port.iceberg=0", "-port.lance=0",
                                      f"-filer={ip}:{self.filer_port}", f"-config={self.s3_config}"], d)
        self.processes.append(self.gateway)
        self.start_gateway()

    def start_gateway(self):
        self.gateway.start()

        def answers():
            try:
                http_get(self.endpoint + "/")
            except urllib.error.HTTPError:
                return True  # 403 for an unsigned request: it is up
            return True
        wait_until("SeaweedFS S3 gateway", answers, 60, self._logs)

    def stop_gateway(self):
        self.gateway.stop()

    def env(self, **extra):
        """An environment with the cluster's credentials and endpoint (and no stray AWS settings)."""
        e = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        e.update(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY, AWS_REGION=REGION,
                 AWS_ENDPOINT_URL=self.endpoint, AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
        e.update(extra)
        return e

    def make_bucket(self, name):
        """PUT /BUCKET signed by the curl command line (SigV4, like ours)."""
        subprocess.run(["curl", "-sS", "-f", "-X", "PUT", "--aws-sigv4", f"aws:amz:{REGION}:s3",
                        "--user", f"{ACCESS_KEY}:{SECRET_KEY}", f"{self.endpoint}/{name}"],
                       check=True, capture_output=True, timeout=60)

    def get(self, path):
        """A signed GET of /PATH (an object, or a listing such as
        "BUCKET?uploads="): the body."""
        return subprocess.run(["curl", "-sS", "-f", "--aws-sigv4", f"aws:amz:{REGION}:s3",
                               "--user", f"{ACCESS_KEY}:{SECRET_KEY}", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                               f"{self.endpoint}/{path}"],
                              check=True, capture_output=True, timeout=60).stdout

    def put_object(self, bucket, key, data):
        subprocess.run(["curl", "-sS", "-f", "-X", "PUT", "--aws-sigv4", f"aws:amz:{REGION}:s3",
                        "--user", f"{ACCESS_KEY}:{SECRET_KEY}", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                        "--data-binary", "@-", f"{self.endpoint}/{bucket}/{key}"],
                       input=data, check=True, capture_output=True, timeout=60)

    def __exit__(self, *exc):
        for p in reversed(self.processes):
            p.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def seaweedfs_for_class(cls, prefix):
    """In a TestCase's setUpClass: cls.tmp (a new directory, a Path),
    cls.cluster (SeaweedFS holding the bucket "models") and its AWS_*
    variables set in this process's environment for the daemons and tools
    the tests start. All undone by class cleanups, which run even when
    setUpClass fails half way (tearDownClass would not)."""
    cls.tmp = Path(tempfile.mkdtemp(prefix=prefix))
    cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
    saved = dict(os.environ)

    def restore_environment():
        os.environ.clear()
        os.environ.update(saved)
    cls.addClassCleanup(restore_environment)
    cls.cluster = cls.enterClassContext(SeaweedFS())
    os.environ.update({k: v for k, v in cls.cluster.env().items() if k.startswith("AWS_")})
    cls.cluster.make_bucket("models")


class Nginx:
    """`with Nginx(root) as web:` nginx serving `root` read-only at web.url
    (http://127.0.0.1:PORT/). With tls=True, https:// under a self-signed
    certificate for 127.0.0.1, whose PEM file is web.certificate."""

    def __init__(self, root, tls=False):
        self.root = os.path.abspath(root)
        self.dir = tempfile.mkdtemp(prefix="ptwmfs-nginx-")
        self.port = free_port()
        self.tls = tls
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}/"
        self.certificate = os.path.join(self.dir, "cert.pem")
        self.proc = None

    def __enter__(self):
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        conf = os.path.join(self.dir, "nginx.conf")
        listen = f"listen 127.0.0.1:{self.port};"
        if self.tls:
            key = os.path.join(self.dir, "key.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                            "-keyout", key, "-out", self.certificate], check=True, capture_output=True, timeout=60)
            listen = (f"listen 127.0.0.1:{self.port} ssl;\n        ssl_certificate {self.certificate};\n"
                      f"        ssl_certificate_key {key};")
        with open(conf, "w") as f:
            # Workers as the test's own user: the temporary trees are 0700.
            user = "user root;\n" if os.geteuid() == 0 else ""
            f.write(f"""daemon off;
{user}worker_processes 1;
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log;
events {{ worker_connections 256; }}
http {{
    log_format bytes '$body_bytes_sent "$http_user_agent"';
    access_log {self.dir}/access.log bytes;
    client_body_temp_path {self.dir}/body;
    proxy_temp_path {self.dir}/proxy;
    fastcgi_temp_path {self.dir}/fastcgi;
    uwsgi_temp_path {self.dir}/uwsgi;
    scgi_temp_path {self.dir}/scgi;
    server {{
        {listen}
        root {self.root};
        default_type application/octet-stream;
    }}
}}
""")
        self.proc = subprocess.Popen(bound_to_this_process([nginx, "-c", conf, "-p", self.dir]),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

        def up():
            try:
                http_get(self.url, context=ssl._create_unverified_context() if self.tls else None)
            except urllib.error.HTTPError:
                pass
            return True
        try:
            wait_until("nginx", up, 30)
        except BaseException:
            self.__exit__()
            raise
        return self

    def body_bytes_sent(self, requests, timeout=10):
        """Bytes of response bodies nginx sent so far, from its access log,
        to clients other than this test's readiness checks (urllib's), once
        it has logged at least `requests` of them (the count the client
        made: a line follows its response, late on a loaded machine, and a
        missing one would undercount)."""
        deadline = time.monotonic() + timeout
        while True:
            with open(os.path.join(self.dir, "access.log")) as f:
                sent = [int(line.split()[0]) for line in f
                        if line.split() and line.split()[0].isdigit() and "Python-urllib" not in line]
            if len(sent) >= requests:
                return sum(sent)
            if time.monotonic() > deadline:
                raise AssertionError(f"nginx logged {len(sent)} of the {requests} requests made, {timeout} s after")
            time.sleep(0.05)

    def __exit__(self, *exc):
        if self.proc:
            stop_session(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)



class Proxy:
    """`with Proxy(upstream) as proxy:` an HTTP proxy at proxy.url, on
    loopback and in this process (threads, no server left behind), passing
    every request to `upstream` as it came (its Host header and signature
    too) -- except the first `count` whose method is `method` and whose path
    holds `match`, set by proxy.fault(...), which get `mode`:
    'delay_after' (sent upstream, its answer held back `seconds`) or
    'reset_after' (sent upstream, the connection reset instead of the
    answer). proxy.faulted is set once such a request has been answered
    upstream, proxy.faults counts them.

    Answers can also be falsified: each function put in proxy.lies gets an
    answer to a GET as (path, status, headers, body), headers a dict, and
    returns (status, headers, body) changed, or None to leave it and stay
    for the next answer; once it changed one it is spent (proxy.lies_told
    counts them). Headers named in proxy.drop_headers are left out of every
    answer (a server that sends no ETag)."""

    HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "expect"}

    def __init__(self, upstream):
        self.upstream = upstream.split("//", 1)[1].rstrip("/")  # host:port
        self.lock = threading.Lock()
        self.rule = None
        self.faults = 0
        self.faulted = threading.Event()
        self.lies = []
        self.lies_told = 0
        self.drop_headers = set()

    def fault(self, mode, method, match, count=1, seconds=0):
        with self.lock:
            self.rule = dict(mode=mode, method=method, match=match, count=count, seconds=seconds)
            self.faults = 0
            self.faulted.clear()

    def _mode(self, method, path):
        with self.lock:
            r = self.rule
            if r and r["method"] == method and r["match"] in path and self.faults < r["count"]:
                self.faults += 1
                return r["mode"], r["seconds"]
        return "pass", 0

    def _falsified(self, path, status, headers, body):
        with self.lock:
            for lie in list(self.lies):
                told = lie(path, status, dict(headers), body)
                if told is not None:
                    self.lies.remove(lie)
                    self.lies_told += 1
                    status, changed, body = told
                    headers = [(k, v) for k, v in changed.items() if k.lower() != "content-length"]
                    headers.append(("Content-Length", str(len(body))))
                    break
        return status, headers, body

    def __enter__(self):
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_any(self):
                mode, seconds = proxy._mode(self.command, self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                host, port = proxy.upstream.split(":")
                conn = http.client.HTTPConnection(host, int(port), timeout=60)
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for k, v in self.headers.items():
                    if k.lower() not in Proxy.HOP:
                        conn.putheader(k, v)
                conn.endheaders(body or None)
                resp = conn.getresponse()
                data = resp.read() if self.command != "HEAD" else b""
                dropped = Proxy.HOP | {h.lower() for h in proxy.drop_headers}
                headers = [(k, v) for k, v in resp.getheaders() if k.lower() not in dropped]
                conn.close()
                status = resp.status
                if self.command == "GET":
                    status, headers, data = proxy._falsified(self.path, status, headers, data)
                if mode != "pass":
                    proxy.faulted.set()
                if mode == "delay_after":
                    time.sleep(seconds)
                elif mode == "reset_after":
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    self.connection.close()
                    self.close_connection = True
                    return
                try:
                    self.send_response(status)
                    for k, v in headers:
                        self.send_header(k, v)
                    if self.command != "HEAD" and "content-length" not in {k.lower() for k, _ in headers}:
                        self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                except OSError:  # the client left (an interrupted run) while its answer was held
                    self.close_connection = True

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_any

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)
