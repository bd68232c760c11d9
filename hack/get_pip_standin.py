"""Offline stand-in for the get-pip bootstrap script that ansible-test downloads.

ansible-test sanity --venv runs `get-pip.py <pip install args>` inside each new
virtual environment. On hosts that reach only a package mirror, this file is
copied to ~/.ansible/test/cache/get_pip_<version>.py: it bootstraps pip from
the interpreter's bundled wheel, then installs the requested packages through
the configured index. ensurepip runs in a subprocess because in-process it sets
PIP_CONFIG_FILE=/dev/null, which would drop the host's pip configuration.
"""
import subprocess
import sys

GET_PIP_ONLY_OPTIONS = {"--no-setuptools", "--no-wheel"}


def main():
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"])
    args = [a for a in sys.argv[1:] if a not in GET_PIP_ONLY_OPTIONS]
    subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)


if __name__ == "__main__":
    main()
