"""Go's regexp for Kubernetes' CEL find/findAll: the subset of patterns read alike by Go and RE2, and Go's walk of
successive matches."""
import pytest

from ansible_collections.dra.admin.plugins.module_utils.kube import go_regex

pytest.importorskip("re2")


@pytest.mark.parametrize("pattern", [
    "", "abc", "^h[0-9]+$", r"\d+\.\d*", r"[a-z_\-]+", r"(?:ab|a)(c|bcd)", r"\bword\B", "a{2,5}?", "x*?",
    r"([0-9]{1,3}\.){3}[0-9]{1,3}", r"[^\s]", r"\Aab\z", "é.",
])
def test_patterns_in_the_subset(pattern):
    assert go_regex.check(pattern) is None


@pytest.mark.parametrize("pattern", [
    "(?i)a", "(?P<n>a)", "(?=a)", r"\p{L}", "[[:alpha:]]", r"\Qa\E", r"\x41", r"a\1", "a{,3}", "a{1001}",
    "((a{10}){10}){11}", "a**", "a*+", "^*", "[]a]", "[-a]", "[a-]", "[a&&b]", "a}", "a]", "x" * 300,
])
def test_patterns_outside_the_subset(pattern):
    with pytest.raises(go_regex.PatternUnsupported):
        go_regex.check(pattern)


@pytest.mark.parametrize("pattern", ["(", "a)", "*a", "a|*", "[z-a]", "[a", "a\\"])
def test_patterns_go_refuses(pattern):
    with pytest.raises(go_regex.IllegalRegex):
        go_regex.check(pattern)


@pytest.mark.parametrize("text,pattern,limit,expected", [
    ("baaa", "a*", -1, ["", "aaa"]),  # the empty match at the end abuts "aaa": skipped, as Go does
    ("abc", "", -1, ["", "", "", ""]),
    ("héllo", "x*", -1, [""] * 6),  # positions are characters (runes), not bytes
    ("a1b22c333", r"\d+", 2, ["1", "22"]),
    ("a1", r"\d", 0, []),
    ("abcd", "(ab|a)(c|bcd)", -1, ["abc"]),  # leftmost-first, not leftmost-longest
    ("a\n", "a$", -1, []),  # $ is the end of the text only
])
def test_find_all_walks_matches_as_go(text, pattern, limit, expected):
    assert go_regex.find_all(text, pattern, limit) == expected


def test_find_gives_the_first_match_or_nothing():
    assert go_regex.find("h100-sxm", "[0-9]+") == "100"
    assert go_regex.find("h100-sxm", "z") == ""
