# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A node's DRA state read from its files, sockets and container runtime (module dra_node_state_info), and
the node-side repairs of what the check proved stale (module dra_node_state_repair), each re-checked on the
node right before it acts. What the files mean is nodes/node_state.py's; what is stale, nodes/node_check.py's.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import socket
import stat

from ansible_collections.dra.admin.plugins.module_utils.common.errors import InputError
from ansible_collections.dra.admin.plugins.module_utils.access.files import move_to_backup, read_text
from ansible_collections.dra.admin.plugins.module_utils.nodes import node_state

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - a node without PyYAML reads JSON specs only
    HAS_YAML = False

SOCKET_TIMEOUT = 1.0
# Every socket of a DRA driver (registration, DRA service) is a gRPC server, that is HTTP/2: a client opens with the
# connection preface and a SETTINGS frame, and a live server sends its own SETTINGS frame first thing (RFC 9113,
# 3.4). A process that is stopped or hung still has the kernel accept connections on its socket, but sends nothing.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HTTP2_EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
HTTP2_FRAME_HEADER = 9
HTTP2_SETTINGS = 4


def _read_frame_header(client):
    data = b""
    while len(data) < HTTP2_FRAME_HEADER:
        chunk = client.recv(HTTP2_FRAME_HEADER - len(data))
        if not chunk:
            break
        data += chunk
    return data


def http2_settings_answer(header):
    """(True, None) when the bytes are an HTTP/2 SETTINGS frame header on stream 0, else (False, why)."""
    if len(header) < HTTP2_FRAME_HEADER:
        return False, "closed the connection without answering"
    stream = int.from_bytes(header[5:9], "big") & 0x7FFFFFFF
    if header[3] != HTTP2_SETTINGS or stream != 0:
        return False, "answers, but not as a gRPC server (no HTTP/2 SETTINGS frame)"
    return True, None


def socket_answers(path):
    """(True, None) when a gRPC server answers on the Unix socket `path` within SOCKET_TIMEOUT (its HTTP/2 SETTINGS
    frame), else (False, why): nothing listens, or a process accepts but does not answer (stopped, hung)."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(SOCKET_TIMEOUT)
    try:
        client.connect(path)
        client.sendall(HTTP2_PREFACE + HTTP2_EMPTY_SETTINGS)
        return http2_settings_answer(_read_frame_header(client))
    except socket.timeout:
        return False, "accepts connections but sends nothing within %.0f s (the process is stopped or hung)" % (
            SOCKET_TIMEOUT)
    except (OSError, IOError) as exc:
        return False, os.strerror(exc.errno) if exc.errno else str(exc)
    finally:
        client.close()


def _entries(directory):
    try:
        return sorted(os.listdir(directory)), None
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return [], None
        return [], "%s: %s" % (directory, os.strerror(exc.errno))


def _is_socket(path):
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


def read_checkpoint(root_dir):
    path = os.path.join(root_dir, node_state.CHECKPOINT_FILE)
    if not os.path.exists(path):
        return {"path": path, "present": False, "format": None, "checksum_ok": None, "claims": [], "error": None}
    try:
        report = node_state.parse_checkpoint(read_text(path))
    except (OSError, IOError, UnicodeDecodeError) as exc:
        report = node_state.unknown("unreadable: %s" % exc, claims=[])
    report.update(path=path, present=True)
    report.setdefault("checksum_ok", None)
    return report


def read_registration(root_dir, errors):
    directory = os.path.join(root_dir, node_state.REGISTRY_DIR_NAME)
    names, error = _entries(directory)
    if error:
        errors.append(error)
    sockets = []
    for name in names:
        path = os.path.join(directory, name)
        entry = node_state.registration_socket(name)
        entry["path"] = path
        entry["is_socket"] = _is_socket(path)
        entry["answers"], entry["error"] = socket_answers(path) if entry["is_socket"] else (False, "not a socket")
        sockets.append(entry)
    return {"dir": directory, "sockets": sockets}


def read_plugin_dirs(root_dir, errors):
    directory = os.path.join(root_dir, node_state.PLUGINS_DIR_NAME)
    names, error = _entries(directory)
    if error:
        errors.append(error)
    out = []
    for name in names:
        path = os.path.join(directory, name)
        if not os.path.isdir(path):
            continue
        files, error = _entries(path)
        if error:
            errors.append(error)
        sockets = []
        for file_name in files:
            sock_path = os.path.join(path, file_name)
            if _is_socket(sock_path):
                entry = node_state.plugin_socket(file_name)
                entry["path"] = sock_path
                entry["answers"], entry["error"] = socket_answers(sock_path)
                sockets.append(entry)
        out.append({"path": path, "name": name, "sockets": sockets, "files": files})
    return out


def _load_spec(path):
    text = read_text(path)
    if path.endswith(".json"):
        return json.loads(text)
    if not HAS_YAML:
        raise ValueError("a YAML spec and no PyYAML on the node")
    return yaml.safe_load(text)


def read_cdi(spec_dirs, errors):
    specs = []
    for directory in spec_dirs:
        names, error = _entries(directory)
        if error:
            errors.append(error)
        for name in names:
            path = os.path.join(directory, name)
            if not name.endswith(node_state.CDI_SPEC_SUFFIXES) or not os.path.isfile(path):
                continue
            try:
                specs.append(node_state.cdi_spec(path, _load_spec(path)))
            except (OSError, IOError, ValueError, UnicodeDecodeError) as exc:
                specs.append(node_state.cdi_spec(path, None, "unreadable: %s" % exc))
            except Exception as exc:  # a YAML error  # pylint: disable=broad-except
                specs.append(node_state.cdi_spec(path, None, "not YAML: %s" % str(exc).splitlines()[0]))
    return specs


def read_containers(run, crictl, endpoint):
    """Running containers and their CDI devices through crictl; {available, crictl, reason, items}."""
    if not crictl:
        return {"available": False, "crictl": None, "reason": "crictl not found", "items": []}
    base = [crictl, "--runtime-endpoint", endpoint] if endpoint else [crictl]
    rc, out, err = run(base + ["ps", "-o", "json"])
    if rc != 0:
        return {"available": False, "crictl": crictl, "reason": "crictl ps failed: %s" % (err or out).strip(),
                "items": []}
    try:
        ids = node_state.running_container_ids(json.loads(out))
    except ValueError as exc:
        return {"available": False, "crictl": crictl, "reason": "crictl ps: not JSON (%s)" % exc, "items": []}
    items = []
    if ids:
        rc, out, err = run(base + ["inspect", "-o", "json"] + ids)
        if rc != 0:
            return {"available": False, "crictl": crictl, "reason": "crictl inspect failed: %s" % (err or out).strip(),
                    "items": []}
        try:
            items = node_state.inspected_containers(json.loads(out))
        except ValueError as exc:
            return {"available": False, "crictl": crictl, "reason": "crictl inspect: not JSON (%s)" % exc,
                    "items": []}
    return {"available": True, "crictl": crictl, "reason": None, "items": items}


def kubelet_running(proc_dir="/proc"):
    """Whether a process named kubelet runs (its /proc/<pid>/comm)."""
    names, dummy = _entries(proc_dir)
    for pid in names:
        if pid.isdigit():
            try:
                if read_text(os.path.join(proc_dir, pid, "comm")).strip() == "kubelet":
                    return True
            except (OSError, IOError):
                continue
    return False


class NodeStateInputError(InputError):
    """A path given to read the node's state from is not what it must be; nothing is read."""


def path_errors(params):
    """The paths the state is read from that cannot be right, each naming the option and the fix: the kubelet's
    root directory must be a directory that exists (a wrong one would make every live claim and socket look
    gone); a CDI spec directory may be missing (nothing is there yet), but not be something else."""
    errors = []
    root = params["kubelet_root_dir"]
    if not os.path.isdir(root):
        errors.append("kubelet_root_dir %s %s: give the kubelet's --root-dir (default /var/lib/kubelet)" % (
            root, "is not a directory" if os.path.exists(root) else "does not exist"))
    for directory in params["cdi_spec_dirs"]:
        if os.path.exists(directory) and not os.path.isdir(directory):
            errors.append("cdi_spec_dirs: %s is not a directory: give the container runtime's CDI spec "
                          "directories (default /etc/cdi and /var/run/cdi)" % directory)
    return errors


def gather(params, run, crictl):
    """The node's DRA state (the module's ``dra_node_state`` fact); NodeStateInputError before reading anything
    when a path given cannot be right (path_errors)."""
    problems = path_errors(params)
    if problems:
        raise NodeStateInputError("; ".join(problems))
    root = params["kubelet_root_dir"]
    errors = []
    cdi = read_cdi(params["cdi_spec_dirs"], errors)
    containers = read_containers(run, crictl, params["runtime_endpoint"]) if params["containers"] else {
        "available": False, "crictl": None, "reason": "skipped (containers is false)", "items": []}
    users = node_state.specs_in_use(cdi, containers["items"])
    for spec in cdi:
        spec["used_by"] = users.get(spec["path"], []) if containers["available"] else None
    return {"node": params["node_name"] or socket.gethostname(), "kubelet_root_dir": root,
            "kubelet_running": kubelet_running(), "checkpoint": read_checkpoint(root),
            "registration": read_registration(root, errors), "plugin_dirs": read_plugin_dirs(root, errors),
            "cdi_spec_dirs": list(params["cdi_spec_dirs"]), "cdi_specs": cdi, "containers": containers,
            "errors": errors}


# --- repairs on the node ------------------------------------------------------------------------

def recheck(repair, fresh):
    """None when the repair still holds on the node's state read just now, else why it no longer does."""
    kind, path = repair["kind"], repair["path"]
    if kind == "cdi_spec":
        spec = [s for s in fresh["cdi_specs"] if s["path"] == path]
        if not spec:
            return "%s is gone already" % path
        if spec[0]["used_by"] is None:
            return "cannot tell which containers use %s: %s" % (path, fresh["containers"]["reason"])
        if spec[0]["used_by"]:
            return "%s is used by running container(s) %s" % (path, ", ".join(c[:13] for c in spec[0]["used_by"]))
        if sorted(spec[0]["claim_uids"]) != sorted(repair["claim_uids"]):
            return "%s now names claims %s" % (path, ", ".join(spec[0]["claim_uids"]))
        return None
    if kind == "socket":
        entries = [s for s in fresh["registration"]["sockets"] if s["path"] == path]
        entries += [s for d in fresh["plugin_dirs"] for s in d["sockets"] if s["path"] == path]
        if not entries:
            return "%s is gone already" % path
        if entries[0]["answers"]:
            return "%s answers now" % path
        return None
    return "unknown repair kind %s" % kind


def remove_socket(path):
    """Remove a socket nobody listens on. A socket file holds no data (it cannot be copied, nor moved to another
    file system): the driver's plugin binds a new one when it starts, so there is nothing to keep."""
    os.unlink(path)
    return None


def repair(repairs, fresh, backup_dir, check_mode):
    """Carry out the repairs that still hold: a CDI spec moved into `backup_dir` (reversible by moving it back),
    a dead socket removed.
    Returns (done, refused): done [{kind, path, backup, reason}], refused [{kind, path, why}]."""
    done, refused = [], []
    for item in repairs:
        why = recheck(item, fresh)
        if why:
            refused.append({"kind": item["kind"], "path": item["path"], "why": why})
            continue
        backup = None
        if not check_mode:
            backup = remove_socket(item["path"]) if item["kind"] == "socket" else move_to_backup(item["path"], backup_dir)
        done.append({"kind": item["kind"], "path": item["path"], "backup": backup, "reason": item.get("reason")})
    return done, refused
