# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Go's regexp, as Kubernetes' CEL regex library (``find``, ``findAll``) runs it, for a safe subset of patterns.

The matching engine is RE2 (the ``re2`` module of google-re2, which cel-python already needs): Go's regexp is RE2's
syntax and leftmost-first semantics, in linear time. A pattern is evaluated only when every construct in it is one
whose meaning is the same in Go's regexp and in RE2 (``check``): literals, ``.``, ``^`` ``$`` ``\\A`` ``\\z``
``\\b`` ``\\B``, the Perl classes ``\\d \\w \\s`` and their negations, ``\\n \\t \\r \\f \\v``, a backslash before
ASCII punctuation, bracket classes of literals, ranges and Perl classes, plain and ``(?:`` groups, alternation,
and ``* + ? {n} {n,} {n,m}`` (lazy or not) with counts and nested counts within Go's 1000. Anything else (flags,
named groups, ``\\p``, POSIX classes, ``\\Q..\\E``, octal or hex escapes, a ``{`` that is not a repetition) is
``Unsupported``: the explainer answers "cannot evaluate" rather than guess. A pattern that Go would refuse to
compile for a reason this subset can prove (an unbalanced parenthesis or bracket, a repetition with nothing to
repeat, a reversed range) is an ``IllegalRegex``.

``find_all`` walks the matches as Go's ``FindAllString`` does (an empty match right after a match is skipped),
not as Python's ``finditer`` does.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import string

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError

MAX_PATTERN = 256  # longer patterns are refused: their expansion could pass RE2's or Go's size limits
MAX_REPEAT = 1000  # Go's regexp/syntax: a count above it (or nested counts whose product is) does not compile
PERL_CLASSES = frozenset("dDwWsS")
ASSERTIONS = frozenset("AzbB")
CONTROL_ESCAPES = frozenset("ntrfv")
PUNCTUATION = frozenset(string.punctuation)
META = frozenset("\\.^$|?*+()[]{}")


class PatternUnsupported(DraAdminError):
    """The pattern uses a construct outside the subset whose meaning Go and RE2 share."""


class IllegalRegex(DraAdminError):
    """A pattern Go's regexp refuses (and RE2 too)."""


def _escape(pattern, i, in_class):
    """The escape at pattern[i] (a backslash) as (kind, end): kind 'literal', 'class' (a Perl class) or 'assert'."""
    if i + 1 >= len(pattern):
        raise IllegalRegex("trailing backslash at end of expression")
    c = pattern[i + 1]
    if c in PUNCTUATION or c in CONTROL_ESCAPES:
        return "literal", i + 2
    if c in PERL_CLASSES:
        return "class", i + 2
    if c in ASSERTIONS and not in_class:
        return "assert", i + 2
    raise PatternUnsupported("the escape \\%s" % c)


def _class_end(pattern, i):
    """The index after the bracket class that starts at pattern[i] ("[")."""
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        j += 1
    if j < len(pattern) and pattern[j] in "]-":
        raise PatternUnsupported("a class that starts with %s" % pattern[j])
    previous = None  # the last single character of the class, the start of a possible range
    while j < len(pattern):
        c = pattern[j]
        if c == "]":
            if j == i + 1 or (j == i + 2 and pattern[i + 1] == "^"):
                raise PatternUnsupported("an empty class")
            return j + 1
        if c == "[" or pattern[j:j + 2] in ("&&", "~~", "||", "--"):
            raise PatternUnsupported("a class with %s" % pattern[j:j + 2])
        if c == "-":
            if j + 1 < len(pattern) and pattern[j + 1] == "]":
                raise PatternUnsupported("a class that ends with -")
            if previous is None:
                raise PatternUnsupported("a range without a start")
            j += 1
            end, j = _class_char(pattern, j)
            if end is None:
                raise PatternUnsupported("a range that ends in a Perl class")
            if end < previous:
                raise IllegalRegex("invalid character class range")
            previous = None
            continue
        previous, j = _class_char(pattern, j)
    raise IllegalRegex("missing closing ]")


def _class_char(pattern, j):
    """(the character, or None for a Perl class; the index after it) of one item of a bracket class."""
    if j >= len(pattern):
        raise IllegalRegex("missing closing ]")
    if pattern[j] != "\\":
        return pattern[j], j + 1
    kind, end = _escape(pattern, j, True)
    if kind == "class":
        return None, end
    c = pattern[j + 1]
    return ({"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v"}.get(c, c)), end


def _counted(pattern, i):
    """(min, max or -1 for no bound, end) of a {n}, {n,} or {n,m} at pattern[i], or None when it is not one."""
    close = pattern.find("}", i)
    if close < 0:
        return None
    body = pattern[i + 1:close]
    low, comma, high = body.partition(",")
    if not low.isdigit() or (high and not high.isdigit()) or not low.isascii() or not high.isascii():
        return None
    low_n = int(low)
    high_n = int(high) if high else (-1 if comma else low_n)
    if low_n > MAX_REPEAT or high_n > MAX_REPEAT or (high_n >= 0 and high_n < low_n):
        raise PatternUnsupported("the repetition {%s}" % body)
    return low_n, high_n, close + 1


def _repetition(pattern, i):
    """(count, end) of the repetition operator at pattern[i] (count: its bound for Go's nested limit, end: after an
    optional lazy ?)."""
    if pattern[i] == "{":
        counted = _counted(pattern, i)
        if counted is None:
            raise PatternUnsupported("a { that is not a repetition")
        low, high, end = counted
        count = max(high if high >= 0 else low, 1)
    else:
        count, end = 1, i + 1
    if end < len(pattern) and pattern[end] == "?":
        end += 1
    if end < len(pattern) and pattern[end] in "*+?{":
        raise PatternUnsupported("a repetition of a repetition")
    return count, end


def check(pattern):
    """None when the pattern is in the subset (PatternUnsupported otherwise, IllegalRegex where Go fails too)."""
    if len(pattern) > MAX_PATTERN:
        raise PatternUnsupported("a pattern longer than %d characters" % MAX_PATTERN)
    groups = [1]  # per open group: the largest product of repetition counts inside it
    last = None  # what a repetition would apply to: None (nothing), "assertion", or the count inside the atom
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c in "*+?{":
            count, i = _repetition(pattern, i)
            if last is None:
                raise IllegalRegex("missing argument to repetition operator")
            if last == "assertion":
                raise PatternUnsupported("a repetition of an assertion")
            if last * count > MAX_REPEAT:
                raise PatternUnsupported("nested repetitions above %d" % MAX_REPEAT)
            groups[-1] = max(groups[-1], last * count)
            last = "assertion"  # a repetition of a repetition was refused above; nothing follows it
            continue
        if c == "\\":
            kind, i = _escape(pattern, i, False)
            last = "assertion" if kind == "assert" else 1
        elif c == "[":
            i, last = _class_end(pattern, i), 1
        elif c == "(":
            if pattern.startswith("(?", i) and not pattern.startswith("(?:", i):
                raise PatternUnsupported("the group %s" % pattern[i:i + 4])
            i += 3 if pattern.startswith("(?:", i) else 1
            groups.append(1)
            last = None
        elif c == ")":
            if len(groups) == 1:
                raise IllegalRegex("unexpected )")
            last, i = groups.pop(), i + 1
        elif c == "|":
            last, i = None, i + 1
        elif c in "^$":
            last, i = "assertion", i + 1
        elif c in "]}":
            raise PatternUnsupported("an unescaped %s" % c)
        else:
            last, i = 1, i + 1
    if len(groups) > 1:
        raise IllegalRegex("missing closing )")
    return None


def _compiled(pattern):
    check(pattern)
    import re2  # google-re2: cel-python's own dependency, present wherever a selector is evaluated
    try:
        return re2.compile(pattern)
    except re2.error as exc:  # not one of the errors check() proves: Go may still compile it
        raise PatternUnsupported("RE2 refuses it: %s" % exc)


def _search(compiled, text, pos=0):
    try:
        return compiled.search(text, pos)
    except UnicodeError:  # a lone surrogate: no UTF-8 string of Go's
        raise PatternUnsupported("the text is not valid UTF-8")


def find(text, pattern):
    """Go's FindString: the leftmost-first match, "" when there is none."""
    found = _search(_compiled(pattern), text)
    return found.group(0) if found else ""


def find_all(text, pattern, limit=-1):
    """Go's FindAllString(text, limit): successive non-overlapping matches, an empty match right after the previous
    match skipped; a negative limit gives them all, 0 none."""
    compiled = _compiled(pattern)
    if limit < 0:
        limit = len(text) + 1
    out, pos, previous_end = [], 0, -1
    while len(out) < limit and pos <= len(text):
        found = _search(compiled, text, pos)
        if found is None:
            break
        start, end = found.span()
        accept = True
        if end == pos:  # an empty match: move one character on, and skip it right after a match
            accept = start != previous_end
            pos += 1
        else:
            pos = end
        previous_end = end
        if accept:
            out.append(found.group(0))
    return out
