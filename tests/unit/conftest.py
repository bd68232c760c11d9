"""Make the checkout importable as ansible_collections.dra.admin for unit tests."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(ROOT, ".tmp", "collections")
LINK = os.path.join(COLLECTIONS, "ansible_collections", "dra", "admin")
if not os.path.islink(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(ROOT, LINK)
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
