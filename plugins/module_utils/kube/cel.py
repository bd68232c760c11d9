# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""DRA's CEL environment for device selectors, on cel-python (``celpy``).

What the scheduler evaluates (k8s.io/dynamic-resource-kube/cel): one variable, ``device``, with
``driver``, ``attributes`` and ``capacity`` (maps of domain to maps of identifier), ``allowMultipleAllocations``
from 1.34; an attribute is an int, bool, string or ``version`` (a semantic version), a capacity a Kubernetes
quantity; an unqualified name belongs to the driver's domain, and looking up a domain the device does not
have gives an empty map. A selector must give a bool; any runtime error (a missing key, a type mismatch)
makes the scheduler's allocation fail with that error.

What is modelled here: the standard CEL operators and macros (through celpy), ``cel.bind``, the ``semver``
and ``quantity`` libraries, heterogeneous equality and cross-type numeric ordering, IEEE division of doubles,
the compile errors of two numeric literal types mixed in one operator, the string extension functions
Kubernetes enables, as the release's cel-go has them, Kubernetes' regex library (``find``, ``findAll``, for the
patterns kube.go_regex proves Go and RE2 read alike) and list library (``isSorted``, ``sum``, ``min``, ``max``,
``indexOf``, ``lastIndexOf``; ``includes`` from 1.37), cel-go's sets extension and list extension (``lists.range``,
``reverse``, ``slice``, ``flatten``, ``distinct``; from 1.34), and the compile errors of functions a release does not
declare (``math.*`` in every release). Checked against the release's own CEL by tests/integration/test_cel_oracle.py.
What is not, and is answered "cannot evaluate" (``Unsupported``): optional syntax (``.?field``, ``[?key]``,
``orValue``), list-valued attributes (1.36+), ``sort``/``sortBy``/``first``/``last``, ip/cidr, url, format,
``strings.quote``, durations and timestamps, two-variable comprehensions, celpy-only macros Kubernetes does not have,
and the compile-time type and cost checks.

cel-python is imported when an expression is first compiled, so the rest of the collection (and
ansible-test's import check) does not need it; a missing library is a ``CelUnavailable`` error.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import operator
import re

from ansible_collections.dra.admin.plugins.module_utils.kube import go_regex
from ansible_collections.dra.admin.plugins.module_utils.kube.quantity import QuantityError, quantity
from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError

LIBRARY = "cel-python"

# Functions and macros a selector may call: CEL's standard ones that celpy implements the way cel-go
# does, and the Kubernetes libraries modelled below. Anything else is Unsupported.
STANDARD_FUNCTIONS = frozenset((
    "size", "has", "all", "exists", "exists_one", "map", "filter", "contains", "startsWith", "endsWith",
    "matches", "int", "uint", "double", "string", "bool", "bytes", "type", "dyn",
))
KUBERNETES_FUNCTIONS = frozenset((
    "semver", "isSemver", "major", "minor", "patch", "compareTo", "isGreaterThan", "isLessThan",
    "quantity", "isQuantity", "asInteger", "asApproximateFloat", "isInteger", "add", "sub",
    "lowerAscii", "upperAscii", "trim", "replace", "split", "substring", "indexOf", "lastIndexOf", "charAt",
    "join", "bind",
    # Kubernetes' regex and list libraries, cel-go's sets and list extensions (``lists.range``: a namespace's).
    "find", "findAll", "isSorted", "sum", "min", "max", "includes", "reverse", "slice", "flatten", "distinct",
    "sets.contains", "sets.equivalent", "sets.intersects", "lists.range",
))
SUPPORTED_FUNCTIONS = STANDARD_FUNCTIONS | KUBERNETES_FUNCTIONS
# Extension libraries called through a namespace (sets.contains, lists.range, math.greatest, ...).
EXTENSION_NAMESPACES = frozenset(("sets", "strings", "lists", "math", "optional", "base64", "regex", "ip", "cidr",
                                  "url", "format", "encoders"))
# Namespaces the environment evaluates (through BindEvaluator): their functions are in SUPPORTED_FUNCTIONS.
MODELLED_NAMESPACES = frozenset(("sets", "lists"))
# No pinned release's environment declares cel-go's math extension (k8s.io/apiserver's base environment and DRA's
# own options have none, 1.33 to 1.38): ``math.greatest(...)`` does not compile.
UNDECLARED_NAMESPACES = frozenset(("math",))
# Functions a release's DRA environment declares only from a minor on; before it a call does not compile. cel-go's
# list extension (ext.Lists version 3: lists.range, reverse, slice, flatten, distinct) is in k8s.io/apiserver's base
# environment from 1.34; Kubernetes' list library version 1 (includes) from 1.37.
LIST_EXTENSION_FROM = 34
INCLUDES_FROM = 37
FUNCTIONS_FROM = {"lists.range": LIST_EXTENSION_FROM, "reverse": LIST_EXTENSION_FROM, "slice": LIST_EXTENSION_FROM,
                  "flatten": LIST_EXTENSION_FROM, "distinct": LIST_EXTENSION_FROM, "includes": INCLUDES_FROM}
# CEL's comprehension macros take one variable here; cel-go's two-variable forms (all(i, v, p), map(x, p, f)) are
# not modelled.
MACROS = frozenset(("all", "exists", "exists_one", "map", "filter"))
OPTIONAL_SYNTAX = re.compile(r"\.\?|\[\?|\borValue\b|\boptional\.")
ATTRIBUTE_KINDS = ("int", "bool", "string", "version")


class CelUnavailable(DraAdminError):
    """cel-python is not installed where the module runs."""


class Unsupported(DraAdminError):
    """The expression or the device uses something this environment does not model: "cannot evaluate"."""


class SelectorError(DraAdminError):
    """A runtime error the scheduler would also hit (its message is cel-go's where celpy's agrees)."""


# ---- where expressions come from --------------------------------------------------------------------

def selector_expressions(selectors):
    """The CEL expressions of a list of DeviceSelectors (``[{cel: {expression}}]``), in order: a request's, a
    DeviceClass's, a 1.33/1.34 DeviceTaintRule's."""
    return [(s.get("cel") or {}).get("expression") for s in selectors or []]


def class_expressions(device_class):
    """The CEL expressions of a DeviceClass's selectors (none for a class not given)."""
    return selector_expressions(((device_class or {}).get("spec") or {}).get("selectors"))


# ---- Kubernetes' semver and quantity values -------------------------------------------------------

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")


def _cmp(a, b):
    return (a > b) - (a < b)


def _prerelease_cmp(first, second):
    for x, y in zip(first, second):
        if x == y:
            continue
        if x.isdigit() and y.isdigit():
            return _cmp(int(x), int(y))
        if x.isdigit() or y.isdigit():
            return -1 if x.isdigit() else 1
        return _cmp(x, y)
    return _cmp(len(first), len(second))


class Semver:
    """A semantic version as Kubernetes' semver library compares it (build metadata ignored)."""

    def __init__(self, text):
        match = _SEMVER.match(text)
        if not match:
            raise SelectorError("invalid semver: %s" % text)
        self.core = tuple(int(match.group(i)) for i in (1, 2, 3))
        self.pre = match.group(4).split(".") if match.group(4) else []

    def compare(self, other):
        if self.core != other.core:
            return _cmp(self.core, other.core)
        if not self.pre or not other.pre:
            return _cmp(not self.pre, not other.pre)
        return _prerelease_cmp(self.pre, other.pre)

    def __eq__(self, other):
        return isinstance(other, Semver) and self.compare(other) == 0

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((self.core, tuple(self.pre)))

    def __repr__(self):
        return "semver(%s)" % ".".join(str(n) for n in self.core)


def parse_quantity(text):
    """The exact value of a Kubernetes quantity string (a Fraction, by kube.quantity); SelectorError
    when it is not one, Unsupported when it is finer than Kubernetes keeps (a nano unit)."""
    try:
        value = quantity(text)
    except (QuantityError, ValueError, ZeroDivisionError):
        raise SelectorError("quantities must match the regular expression: %s" % text)
    if (value * 10 ** 9).denominator != 1:
        raise Unsupported("quantity %s is finer than a nano unit (Kubernetes rounds it)" % text)
    return value


class Quantity:
    """A Kubernetes quantity, compared by value."""

    def __init__(self, value):
        self.value = value

    @classmethod
    def parse(cls, text):
        return cls(parse_quantity(text))

    def compare(self, other):
        return _cmp(self.value, other.value)

    def __eq__(self, other):
        return isinstance(other, Quantity) and self.value == other.value

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self.value)

    def __repr__(self):
        return "quantity(%s)" % self.value


# ---- the environment -------------------------------------------------------------------------------

def _bare_ident(member):
    """The identifier a member expression is, when it is only that (``sets`` in ``sets.contains(...)``)."""
    if getattr(member, "data", None) == "member" and len(member.children) == 1:
        primary = member.children[0]
        if getattr(primary, "data", None) == "primary" and getattr(primary.children[0], "data", None) == "ident":
            return str(primary.children[0].children[0])
    return None


def called_functions(tree):
    """The names of the functions and macros an expression calls (celpy's parse tree)."""
    names = set()
    for node in tree.iter_subtrees():
        if node.data == "ident_arg":
            names.add(str(node.children[0]))
        elif node.data in ("member_dot_arg", "dot_ident_arg"):
            receiver = _bare_ident(node.children[0]) if node.data == "member_dot_arg" else None
            if receiver in EXTENSION_NAMESPACES:
                names.add("%s.%s" % (receiver, node.children[1]))
            else:
                names.add(str(node.children[1] if node.data == "member_dot_arg" else node.children[0]))
        elif node.data in ("member_object", "dot_ident"):
            names.add("<message construction>")
    return names


# Operators whose operands cel-go's type checker requires to be of one numeric type when both types are known
# at compile time (literals): 1 == 1.0 and 2.5 * 2 do not compile. Ordering (<, <=, >, >=) mixes them freely.
_SAME_TYPE_OPERATORS = {"relation_eq": "_==_", "relation_ne": "_!=_", "addition_add": "_+_", "addition_sub": "_-_",
                        "multiplication_mul": "_*_", "multiplication_div": "_/_", "multiplication_mod": "_%_"}
_ARITHMETIC = frozenset(("addition_add", "addition_sub", "multiplication_mul", "multiplication_div",
                         "multiplication_mod"))
_ORDERING = frozenset(("relation_lt", "relation_le", "relation_gt", "relation_ge"))
_BINARY = frozenset(_SAME_TYPE_OPERATORS) | _ORDERING
_WRAPPERS = ("expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary", "member",
             "primary", "paren_expr")


def _operator(node):
    """(operator node name, left, right) of a binary operator node of celpy's tree (the parent holds the operator
    node, which holds the left operand, and the right operand), else None."""
    children = getattr(node, "children", ())
    if len(children) == 2 and getattr(children[0], "data", None) in _BINARY \
            and len(children[0].children) == 1:
        return children[0].data, children[0].children[0], children[1]
    return None


def literal_type(node):
    """int, uint or double when the subtree is known to be of that type at compile time (numeric literals and
    arithmetic on them), else None."""
    while getattr(node, "data", None) in _WRAPPERS and len(node.children) == 1:
        node = node.children[0]
    if getattr(node, "data", None) == "literal":
        text = str(node.children[0])
        if re.match(r"^-?(\d+|0x[0-9a-fA-F]+)[uU]$", text):
            return "uint"
        if re.match(r"^-?(\d+|0x[0-9a-fA-F]+)$", text):
            return "int"
        if re.match(r"^-?(\d+\.\d*|\d*\.\d+|\d+)([eE][+-]?\d+)?$", text):
            return "double"
        return None
    found = _operator(node)
    if found and found[0] in _ARITHMETIC:
        kinds = set((literal_type(found[1]), literal_type(found[2])))
        return kinds.pop() if len(kinds) == 1 else None
    return None


def compile_type_error(tree):
    """cel-go's compile error for an operator applied to two numeric types known to differ, or None."""
    for node in tree.iter_subtrees():
        found = _operator(node)
        if found and found[0] in _SAME_TYPE_OPERATORS:
            kinds = (literal_type(found[1]), literal_type(found[2]))
            if None not in kinds and kinds[0] != kinds[1]:
                return "found no matching overload for '%s' applied to '(%s, %s)'" % (
                    _SAME_TYPE_OPERATORS[found[0]], kinds[0], kinds[1])
    return None


def namespace_as_variable(tree):
    """A namespace's name used other than as the receiver of a call (a cel.bind or macro variable), else None."""
    receivers = set()
    for node in tree.iter_subtrees():
        if node.data == "member_dot_arg" and _bare_ident(node.children[0]) in EXTENSION_NAMESPACES:
            receivers.add(id(next(node.children[0].find_data("ident"))))
    for node in tree.iter_subtrees():
        if node.data == "ident" and str(node.children[0]) in EXTENSION_NAMESPACES and id(node) not in receivers:
            return str(node.children[0])
    return None


# The modelled library functions cel-go declares only as methods (``list.sum()``, never ``sum(list)``).
MEMBER_ONLY = frozenset(("find", "findAll", "isSorted", "sum", "min", "max", "includes", "reverse", "slice", "flatten",
                         "distinct"))


# The list methods modelled: on a scalar literal (its type known at compile time) a call does not compile.
LIST_METHODS = frozenset(("isSorted", "sum", "min", "max", "reverse", "slice", "flatten", "distinct"))
_SCALAR_LITERALS = {"STRING_LIT": "string", "MLSTRING_LIT": "string", "BYTES_LIT": "bytes", "INT_LIT": "int",
                    "UINT_LIT": "uint", "FLOAT_LIT": "double"}


def _scalar_literal_kind(node):
    """string, bytes, int, uint or double when the subtree is a literal of that kind, else None."""
    while getattr(node, "data", None) in _WRAPPERS and len(node.children) == 1:
        node = node.children[0]
    if getattr(node, "data", None) == "literal":
        return _SCALAR_LITERALS.get(getattr(node.children[0], "type", None))
    return None


def undeclared_in(tree, minor):
    """cel-go's compile error for a function or namespace the release's environment does not declare, or a modelled
    method called on a literal of a kind it does not take (or as a global function), else None."""
    for node in tree.iter_subtrees():
        if node.data == "ident_arg" and str(node.children[0]) in MEMBER_ONLY:
            return "found no matching overload for '%s'" % node.children[0]
        if node.data == "member_dot_arg":
            name, kind = str(node.children[1]), _scalar_literal_kind(node.children[0])
            if kind and (name in LIST_METHODS or (name in ("find", "findAll") and kind != "string")):
                return "found no matching overload for '%s' applied to '%s.()'" % (name, kind)
    names = called_functions(tree)
    for name in sorted(names):
        namespace = name.split(".", 1)[0] if "." in name else None
        if namespace in UNDECLARED_NAMESPACES:
            return "undeclared reference to '%s'" % namespace
        if minor < FUNCTIONS_FROM.get(name, 0):
            return "undeclared reference to '%s'" % (namespace or name)
    return None


def unsupported_in(tree):
    """Why the parsed expression cannot be evaluated here (None when it can)."""
    shadowed = namespace_as_variable(tree)
    if shadowed:
        return "the namespace %s used as a variable" % shadowed
    names = called_functions(tree)
    unknown = sorted(n for n in names - SUPPORTED_FUNCTIONS if n.split(".", 1)[0] not in UNDECLARED_NAMESPACES)
    if unknown:
        return "function %s is not supported" % ", ".join(unknown)
    return None


def _call_arguments(node):
    """The argument subtrees of a member_dot_arg node."""
    return list(node.children[2].children) if len(node.children) == 3 else []


def _string_literal(node):
    """The value of a subtree that is a string literal, else None."""
    while getattr(node, "data", None) in _WRAPPERS and len(node.children) == 1:
        node = node.children[0]
    if getattr(node, "data", None) == "literal" and node.children[0].type in ("STRING_LIT", "MLSTRING_LIT"):
        from celpy.evaluation import celstr
        return str(celstr(node.children[0]))
    return None


def regex_literal_error(tree):
    """For ``find``/``findAll`` with a literal pattern, cel-go compiles the pattern when it builds the program (the
    regex library's optimization): an illegal one fails the selector whatever else it says. (compile error or None,
    why it cannot be evaluated or None)."""
    for node in tree.iter_subtrees():
        if node.data != "member_dot_arg" or str(node.children[1]) not in ("find", "findAll"):
            continue
        args = _call_arguments(node)
        pattern = _string_literal(args[0]) if args else None
        if pattern is None:
            continue
        try:
            go_regex.check(pattern)
        except go_regex.IllegalRegex as exc:
            return "Illegal regex: %s" % exc, None
        except go_regex.PatternUnsupported as exc:
            return None, "regex %r: %s" % (pattern, exc)
    return None, None


class Environment:
    """Compiles selectors once and evaluates them against devices (``device_activation``)."""

    def __init__(self, minor):
        self.minor = minor
        self._lib = _load(minor)
        self._env = self._lib.environment()
        self._programs = {}

    def program(self, expression):
        """(program, None) or (None, why it cannot be evaluated); a parse error counts as the latter."""
        if expression not in self._programs:
            self._programs[expression] = self._compile(expression)
        return self._programs[expression]

    def _compile(self, expression):
        if OPTIONAL_SYNTAX.search(expression):
            return None, "optional syntax (.?, [?], orValue) is not supported"
        try:
            tree = self._env.compile(expression)
        except Exception as exc:  # celpy raises CELParseError, lark errors below it
            return None, "cannot parse: %s" % str(exc).splitlines()[0]
        why = unsupported_in(tree)
        if why:
            return None, why
        illegal, why = regex_literal_error(tree)
        if why:
            return None, why
        mistyped = undeclared_in(tree, self.minor) or compile_type_error(tree) or illegal
        if mistyped:
            return _CompileError(mistyped), None
        return self._env.program(tree, functions=self._lib.functions), None

    def device_activation(self, driver, fields):
        """The ``device`` variable of one published device (its fields as ``kube.slices.device_fields``)."""
        return self._lib.activation(driver, fields, self.minor)

    def matches(self, expression, activation):
        """True/False; raises Unsupported (cannot evaluate) or SelectorError (the scheduler fails too)."""
        program, why = self.program(expression)
        if program is None:
            raise Unsupported(why)
        if activation is None:
            raise Unsupported("the device has an attribute of a kind this environment does not model")
        return self._lib.run(program, activation)


class _CompileError:
    """A selector the scheduler's CEL compiler refuses: evaluating it fails, as the allocation does."""

    def __init__(self, message):
        self.message = message

    def evaluate(self, activation):
        raise SelectorError("compilation failed: %s" % self.message)


def _load(minor):
    try:
        import celpy  # noqa: F401  pylint: disable=unused-import
    except ImportError:
        raise CelUnavailable("the Python library %s is needed on the host the module runs on "
                             "(pip install 'cel-python>=0.5,<0.6'; requirements.txt of the collection)" % LIBRARY)
    return _CelPy(minor)


class _CelPy:
    """Everything that touches celpy, built when first needed (for the release `minor`)."""

    def __init__(self, minor):
        import celpy
        from celpy import celtypes
        from celpy.evaluation import CELEvalError, Evaluator

        self.celpy, self.types, self.error = celpy, celtypes, CELEvalError
        self.empty_map_class = _default_empty_map_class(celtypes)
        self.runner_class = _bind_runner_class(celpy, Evaluator, CELEvalError, minor)
        self.functions = _functions(self, minor)

    def environment(self):
        return self.celpy.Environment(runner_class=self.runner_class)

    def activation(self, driver, fields, minor):
        t = self.types
        attributes, capacity = {}, {}
        for name, value in _names_in_order(fields.get("attributes"), minor):
            domain, ident = _qualified(name, driver)
            converted = self._attribute(value)
            if converted is None:
                return None
            attributes.setdefault(domain, {})[t.StringType(ident)] = converted
        for name, value in _names_in_order(fields.get("capacity"), minor):
            domain, ident = _qualified(name, driver)
            capacity.setdefault(domain, {})[t.StringType(ident)] = Quantity.parse((value or {}).get("value"))
        device = {t.StringType("driver"): t.StringType(driver),
                  t.StringType("attributes"): self._domains(attributes),
                  t.StringType("capacity"): self._domains(capacity)}
        if minor >= 34:
            device[t.StringType("allowMultipleAllocations")] = t.BoolType(bool(fields.get("allowMultipleAllocations")))
        return {"device": t.MapType(device)}

    def _domains(self, by_domain):
        return self.empty_map_class(dict((self.types.StringType(d), self.types.MapType(m))
                                         for d, m in by_domain.items()))

    def _attribute(self, value):
        t = self.types
        kinds = [k for k in ATTRIBUTE_KINDS if k in (value or {})]
        if len(kinds) != 1 or len(value) != 1:
            return None
        kind = kinds[0]
        if kind == "version":
            return Semver(value[kind])
        return {"int": t.IntType, "bool": t.BoolType, "string": t.StringType}[kind](value[kind])

    def run(self, program, activation):
        try:
            result = program.evaluate(activation)
        except self.error as exc:
            raise SelectorError(_message(exc))
        except (SelectorError, Unsupported):
            raise
        except Exception as exc:  # celpy surfaces some evaluation failures as Python exceptions
            raise SelectorError(str(exc))
        if isinstance(result, self.error):
            raise SelectorError(_message(result))
        if not isinstance(result, self.types.BoolType):
            raise SelectorError("no such overload: the selector gives %s, not a bool" % type(result).__name__)
        return bool(result)


def _message(error):
    """celpy's message, without the activation it appends (a whole device)."""
    text = str(error.args[0] if error.args else error)
    return text.split(" (in activation", 1)[0][:300]


# From 1.38 a device's attributes and capacities are read by fully-qualified name (k8s.io/dynamic-resource-allocation's
# slice conversion): where a device has both "model" and "<driver>/model", the qualified one wins. Before, CEL's map
# was built in a Go map's order (either may win).
QUALIFIED_NAME_WINS_FROM = 38


def _names_in_order(entries, minor):
    """(name, value) of a device's attributes or capacities in the order the activation takes them (the last
    one of a name wins): from 1.38 the qualified names after the bare ones."""
    items = list((entries or {}).items())
    if minor >= QUALIFIED_NAME_WINS_FROM:
        items.sort(key=lambda item: "/" in item[0])
    return items


def _qualified(name, driver):
    domain, dummy, ident = name.rpartition("/")
    return domain or driver, ident


def _default_empty_map_class(celtypes):
    class DefaultEmptyMap(celtypes.MapType):
        """device.attributes / device.capacity: an unknown domain is an empty map (``in`` stays false)."""

        def __getitem__(self, key):
            try:
                return super(DefaultEmptyMap, self).__getitem__(key)
            except KeyError:
                return celtypes.MapType({})

    return DefaultEmptyMap


# Before 1.38 (cel-go 0.29's cost trackers of the list extension) an error value as the receiver of ``distinct()`` or
# the depth of ``flatten(n)`` fails the whole evaluation ("internal error: interface conversion"), even under a
# ``||`` that would absorb it; cel-go evaluates ``||``, ``&&`` and ``?:`` left to right and stops early, celpy does
# not, so such a call is "cannot evaluate" there. From 1.38 it is an error value like any other.
ERROR_ARGUMENT_ABSORBED_FROM = 38


def _bind_runner_class(celpy, evaluator_base, error_class, release):
    class BindEvaluator(evaluator_base):
        """``cel.bind(name, init, body)`` (Kubernetes enables the bindings extension), the namespaced functions of
        MODELLED_NAMESPACES, and ``min()`` as the list library's function (celpy has a macro of that name)."""

        minor = release

        def sub_evaluator(self, ast):
            return BindEvaluator(ast, activation=self.activation)

        def call(self, name, values):
            for value in values:
                if isinstance(value, error_class):
                    return value
            try:
                return self.activation.resolve_function(name)(*values)
            except (TypeError, AttributeError) as exc:
                return error_class("no such overload", exc.__class__, exc.args)

        def member_dot_arg(self, tree):
            member, name = tree.children[:2]
            args = _call_arguments(tree)
            namespace = _bare_ident(member)
            if namespace in MODELLED_NAMESPACES:
                return self.call("%s.%s" % (namespace, name), [self.visit(a) for a in args])
            if str(name) in MACROS and len(args) != 2:
                raise Unsupported("%s with %d arguments (a two-variable comprehension) is not modelled"
                                  % (name, len(args)))
            if str(name) == "min":
                return self.call("min", [self.visit(member)] + [self.visit(a) for a in args])
            if self.minor < ERROR_ARGUMENT_ABSORBED_FROM and str(name) in ("distinct", "flatten"):
                values = [self.visit(member)] + [self.visit(a) for a in args]
                fatal = values[:1] if str(name) == "distinct" else values[1:]  # the receiver; flatten's depth
                if any(isinstance(v, error_class) for v in fatal):
                    raise Unsupported("%s of an error value: cel-go fails the whole evaluation where it gets there"
                                      % name)
                return self.call(str(name), values)
            if str(name) == "bind" and len(tree.children) == 3:
                receiver = [str(t.children[0]) for t in member.find_data("ident")]
                args = tree.children[2].children
                if receiver == ["cel"] and len(args) == 3:
                    idents = list(args[0].find_data("ident"))
                    if len(idents) != 1:
                        raise Unsupported("cel.bind needs a plain variable name")
                    value = self.visit(args[1])
                    if isinstance(value, error_class):
                        return value
                    return self.sub_evaluator(ast=args[2]).evaluate({str(idents[0].children[0]): value})
            return super(BindEvaluator, self).member_dot_arg(tree)

    class BindRunner(celpy.InterpretedRunner):
        def evaluate(self, context):
            return BindEvaluator(ast=self.ast, activation=self.new_activation()).evaluate(context)

    return BindRunner


def _functions(lib, minor):
    """The functions dict celpy binds: cel-go's equality and ordering, Kubernetes' libraries. A runtime error of
    one of them is an error value, as cel-go's are, so that ``false && <error>`` is false and
    ``true || <error>`` true (CEL's logical operators absorb errors where the other side decides)."""
    functions = _comparisons(lib, minor)
    functions.update(_arithmetic(lib))
    functions.update(_semver_functions(lib))
    functions.update(_quantity_functions(lib))
    functions.update(_string_functions(lib, minor))
    functions.update(_regex_functions(lib))
    functions.update(_list_functions(lib, functions))
    functions.update(_set_functions(lib, functions))
    return dict((name, _error_value(lib, fn)) for name, fn in functions.items())


def _error_value(lib, fn):
    def call(*args):
        try:
            return fn(*args)
        except SelectorError as exc:
            return lib.error(str(exc), SelectorError, (str(exc),))
    call.__name__ = getattr(fn, "__name__", "function")
    return call


def _overload():
    return TypeError("no such overload")


# From 1.38 (cel-go 0.33) <, <=, > and >= with a NaN on either side are false; before, an error ("NaN values cannot be
# ordered", from the values' Compare).
NAN_ORDERING_FALSE_FROM = 38


def _comparisons(lib, minor):
    """Heterogeneous equality (mismatched kinds are unequal, numbers compare across kinds) and ordering."""
    t = lib.types
    # celpy gives a plain float for some double arithmetic (2.5 * 2.0): it is a double all the same.
    numbers = (t.IntType, t.UintType, t.DoubleType, float)

    def number(x):
        return float(x) if isinstance(x, float) else int(x)

    def equal(a, b):
        for value in (a, b):
            if isinstance(value, lib.error):
                return value
        if isinstance(a, (Semver, Quantity)) or isinstance(b, (Semver, Quantity)):
            if type(a) is not type(b):
                raise _overload()
            return t.BoolType(a == b)
        if isinstance(a, t.BoolType) or isinstance(b, t.BoolType):
            return t.BoolType(type(a) is type(b) and bool(a) == bool(b))
        if isinstance(a, numbers) and isinstance(b, numbers):
            return t.BoolType(number(a) == number(b))
        if isinstance(a, t.ListType) and isinstance(b, t.ListType):
            return t.BoolType(len(a) == len(b) and all(bool(equal(x, y)) for x, y in zip(a, b)))
        if isinstance(a, t.MapType) and isinstance(b, t.MapType):
            return t.BoolType(len(a) == len(b) and all(k in b and bool(equal(v, b[k])) for k, v in a.items()))
        return t.BoolType(type(a) is type(b) and a == b)

    def not_equal(a, b):
        result = equal(a, b)
        return result if isinstance(result, lib.error) else t.BoolType(not result)

    def ordering(op):
        def compare(a, b):
            for value in (a, b):
                if isinstance(value, lib.error):
                    return value
            bools = isinstance(a, t.BoolType) or isinstance(b, t.BoolType)
            if isinstance(a, numbers) and isinstance(b, numbers) and not bools:
                if any(isinstance(x, float) and math.isnan(x) for x in (a, b)):
                    if minor >= NAN_ORDERING_FALSE_FROM:
                        return t.BoolType(False)
                    raise SelectorError("NaN values cannot be ordered")
                return t.BoolType(op(number(a), number(b)))
            if isinstance(a, (Semver, Quantity)) or type(a) is not type(b):
                raise _overload()
            return t.BoolType(op(a, b))
        return compare

    return {"_==_": equal, "_!=_": not_equal,
            "_<_": ordering(operator.lt), "_<=_": ordering(operator.le),
            "_>_": ordering(operator.gt), "_>=_": ordering(operator.ge)}


def _arithmetic(lib):
    """Division as cel-go divides: doubles by IEEE 754, ints truncating toward zero (by zero: an error); and every
    arithmetic operator only on two values of one kind, as cel-go's overloads are: ``1.5 * <an int attribute>`` is
    "no such overload" at run time (the type checker lets it through, the attribute being dyn), where Python would
    multiply; ``%`` on ints and uints only."""
    t = lib.types
    numbers = (t.IntType, t.UintType, t.DoubleType)

    def one_kind(op, kinds):
        def apply(a, b):
            for value in (a, b):
                if isinstance(value, lib.error):
                    return value
            if (type(a) is not type(b) or isinstance(a, t.BoolType) or not isinstance(a, kinds)):
                raise _overload()
            return type(a)(op(a, b))  # the operand's CEL type (Python's own + of two strings is a plain str)
        apply.__name__ = op.__name__
        return apply

    def divide(a, b):
        for value in (a, b):
            if isinstance(value, lib.error):
                return value
        if isinstance(a, float) and isinstance(b, float):
            x, y = float(a), float(b)
            if y == 0.0:  # IEEE 754, as Go divides doubles; celpy gives inf for 0.0 / 0.0
                return t.DoubleType(math.nan if x == 0.0 or math.isnan(x) else math.copysign(math.inf, x) *
                                    math.copysign(1.0, y))
            return t.DoubleType(x / y)
        if isinstance(a, (t.IntType, t.UintType)) and type(a) is type(b) and not isinstance(a, t.BoolType):
            if int(b) == 0:
                raise SelectorError("division by zero")
            quotient = abs(int(a)) // abs(int(b))  # Go truncates toward zero
            return type(a)(quotient if (int(a) < 0) == (int(b) < 0) else -quotient)
        raise _overload()

    sequences = (t.StringType, t.BytesType, t.ListType)
    return {"_/_": divide, "_*_": one_kind(operator.mul, numbers), "_-_": one_kind(operator.sub, numbers),
            "_+_": one_kind(operator.add, numbers + sequences), "_%_": one_kind(operator.mod, (t.IntType, t.UintType))}


def _same_kind(a, b):
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.compare(b)
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return a.compare(b)
    raise _overload()


def _semver_functions(lib):
    t = lib.types

    def semver(text, normalize=t.BoolType(False)):
        if not isinstance(text, t.StringType):
            raise _overload()
        return Semver(_normalized_semver(str(text)) if normalize else str(text))

    def is_semver(text, normalize=t.BoolType(False)):
        try:
            semver(text, normalize)
        except SelectorError:
            return t.BoolType(False)
        return t.BoolType(True)

    def part(index):
        def call(version):
            if not isinstance(version, Semver):
                raise _overload()
            return t.IntType(version.core[index])
        return call

    return {"semver": semver, "isSemver": is_semver, "major": part(0), "minor": part(1), "patch": part(2),
            "compareTo": lambda a, b: t.IntType(_same_kind(a, b)),
            "isGreaterThan": lambda a, b: t.BoolType(_same_kind(a, b) > 0),
            "isLessThan": lambda a, b: t.BoolType(_same_kind(a, b) < 0)}


def _quantity_functions(lib):
    t = lib.types

    def quantity(text):
        if not isinstance(text, t.StringType):
            raise _overload()
        return Quantity.parse(str(text))

    def is_quantity(text):
        try:
            quantity(text)
        except SelectorError:
            return t.BoolType(False)
        return t.BoolType(True)

    def of_quantity(fn):
        def call(q, *args):
            if not isinstance(q, Quantity):
                raise _overload()
            return fn(q, *args)
        return call

    def as_integer(q):
        if q.value.denominator != 1 or not -2 ** 63 <= q.value < 2 ** 63:
            raise SelectorError("cannot convert value to integer")
        return t.IntType(int(q.value))

    def arithmetic(sign):
        def call(q, other):
            if isinstance(other, Quantity):
                return Quantity(q.value + sign * other.value)
            if isinstance(other, t.IntType):
                return Quantity(q.value + sign * int(other))
            raise _overload()
        return call

    return {"quantity": quantity, "isQuantity": is_quantity, "asInteger": of_quantity(as_integer),
            "isInteger": of_quantity(lambda q: t.BoolType(q.value.denominator == 1)),
            "asApproximateFloat": of_quantity(lambda q: t.DoubleType(float(q.value))),
            "add": of_quantity(arithmetic(1)), "sub": of_quantity(arithmetic(-1))}


def _split(text, sep, limit=None):
    """Go's strings.Split / SplitN: an empty separator splits after each character; a limit of 0 gives no
    parts, a negative one all of them."""
    limit = -1 if limit is None else int(limit)
    if limit == 0:
        return []
    if sep == "":
        parts = list(text)
        if 0 < limit < len(parts):
            parts = parts[:limit - 1] + ["".join(parts[limit - 1:])]
        return parts
    return text.split(sep) if limit < 0 else text.split(sep, limit - 1)


# From 1.37 (cel-go 0.29) an empty substring's index is checked against the offset (a negative one fails, one past
# the end gives the length); before, indexOf("", n) and lastIndexOf("", n) give n, whatever it is.
EMPTY_SUBSTRING_CHECKED_FROM = 37


def _index_of(text, sub, offset, minor, last):
    """cel-go's indexOf(sub, offset) / lastIndexOf(sub, offset) on code points."""
    if sub == "" and minor < EMPTY_SUBSTRING_CHECKED_FROM:
        return offset
    if offset < 0:
        raise SelectorError("index out of range: %d" % offset)
    if sub == "":
        return min(offset, len(text))
    if offset >= len(text):
        return -1
    if last:
        return text.rfind(sub, 0, min(offset, len(text) - len(sub)) + len(sub))
    return text.find(sub, offset)


def _string_functions(lib, minor):
    """The string extension functions Kubernetes enables (cel-go ext.Strings, as the release's cel-go has them)."""
    t = lib.types

    def index_of(last):
        def call(s, sub, *offset):
            if not offset:
                return t.IntType(s.rfind(str(sub)) if last else s.find(str(sub)))
            return t.IntType(_index_of(s, str(sub), int(offset[0]), minor, last))
        return call

    def strings(fn):
        def call(s, *args):
            if not isinstance(s, t.StringType):
                raise _overload()
            return fn(str(s), *args)
        return call

    def ascii_case(method):
        return strings(lambda s: t.StringType("".join(getattr(c, method)() if c.isascii() else c for c in s)))

    def replace(s, old, new, *limit):
        count = int(limit[0]) if limit else -1
        return t.StringType(s.replace(str(old), str(new), count) if count >= 0 else s.replace(str(old), str(new)))

    return {
        "lowerAscii": ascii_case("lower"), "upperAscii": ascii_case("upper"),
        "trim": strings(lambda s: t.StringType(s.strip())),
        "replace": strings(replace),
        "split": strings(lambda s, sep, *n: t.ListType([t.StringType(p) for p in _split(s, str(sep), *n)])),
        "substring": strings(lambda s, start, *end: t.StringType(_substring(s, start, end))),
        "indexOf": strings(index_of(False)),
        "lastIndexOf": strings(index_of(True)),
        "charAt": strings(lambda s, i: t.StringType(_char_at(s, int(i)))),
        "join": lambda items, *sep: t.StringType((str(sep[0]) if sep else "").join(str(i) for i in items)),
    }


def _regex_functions(lib):
    """Kubernetes' regex library: ``find`` and ``findAll`` on Go's regexp, for the patterns kube.go_regex can prove
    Go and RE2 read alike (others: cannot evaluate)."""
    t = lib.types

    def regex(fn):
        def call(text, pattern, *limit):
            if not isinstance(text, t.StringType) or not isinstance(pattern, t.StringType) \
                    or any(not isinstance(n, t.IntType) or isinstance(n, t.BoolType) for n in limit):
                raise _overload()
            try:
                return fn(str(text), str(pattern), *[int(n) for n in limit])
            except go_regex.IllegalRegex as exc:
                raise SelectorError("Illegal regex: %s" % exc)
            except go_regex.PatternUnsupported as exc:
                raise Unsupported("regex %r: %s" % (str(pattern), exc))
        return call

    return {"find": regex(lambda s, p: t.StringType(go_regex.find(s, p))),
            "findAll": regex(lambda s, p, *n: t.ListType([t.StringType(m) for m in go_regex.find_all(s, p, *n)]))}


# The kinds the list library's isSorted, min and max take (duration and timestamp too, not modelled here), in the
# order cel-go tries its overloads at run time on a list whose element type is dyn: by the first element.
INT64 = (-2 ** 63, 2 ** 63 - 1)
UINT64 = (0, 2 ** 64 - 1)


def _go_compare(lib, a, b):
    """cel-go's Compare of two values: -1, 0 or 1, or None where it is an error (NaN on the left, mismatched kinds).
    A number against another kind of number compares as cel-go does (an int against a double as a double)."""
    t = lib.types
    if isinstance(a, t.BoolType) or isinstance(b, t.BoolType):
        return _cmp(bool(a), bool(b)) if isinstance(a, t.BoolType) and isinstance(b, t.BoolType) else None
    numbers = (t.IntType, t.UintType, t.DoubleType)
    if isinstance(a, numbers) and isinstance(b, numbers):
        if isinstance(a, t.DoubleType) or isinstance(b, t.DoubleType):
            if isinstance(a, t.DoubleType) and math.isnan(a):
                return None
            if isinstance(b, t.DoubleType) and math.isnan(b):
                return None if isinstance(a, t.DoubleType) else 0
            double, other, sign = (float(a), b, 1) if isinstance(a, t.DoubleType) else (float(b), a, -1)
            if isinstance(other, t.DoubleType):
                return _cmp(float(a), float(b))
            low, high = (float(n) for n in (INT64 if isinstance(other, t.IntType) else UINT64))  # as Go's float64
            if double < low:
                return -sign
            if double > high:
                return sign
            return sign * _cmp(double, float(int(other)))
        return _cmp(int(a), int(b))
    for kind in (t.StringType, t.BytesType):
        if isinstance(a, kind) and isinstance(b, kind):
            return _cmp(a, b) if kind is t.StringType else _cmp(bytes(a), bytes(b))
    return None


def _as_list(t, value):
    """A CEL list's items (no-such-overload for anything else); celpy's plain floats from double arithmetic are
    doubles."""
    if not isinstance(value, t.ListType):
        raise _overload()
    return [t.DoubleType(x) if isinstance(x, float) and not isinstance(x, t.DoubleType) else x for x in value]


def _comparable_items(t, items):
    """The items, when each is of a kind the list library orders; no-such-overload for lists, maps, semvers and
    quantities (cel-go's), Unsupported for kinds not modelled."""
    comparable = (t.IntType, t.UintType, t.DoubleType, t.BoolType, t.StringType, t.BytesType)
    for item in items:
        if not isinstance(item, comparable):
            if isinstance(item, (t.ListType, t.MapType, Semver, Quantity)):
                raise _overload()
            raise Unsupported("a list of %s is not modelled" % type(item).__name__)
    return items


def _list_sum(t, value):
    """`sum()` of a list of ints, uints or doubles, with cel-go's overflow errors."""
    items = _as_list(t, value)
    if not items:
        raise Unsupported("the sum of an empty list is the zero of its static type")
    kinds = {t.IntType: INT64, t.UintType: UINT64, t.DoubleType: None}
    kind = type(items[0])
    if kind not in kinds:
        if isinstance(items[0], (t.StringType, t.BytesType, t.BoolType, t.ListType, t.MapType, Semver, Quantity)):
            raise _overload()
        raise Unsupported("a sum of %s is not modelled" % kind.__name__)
    acc = 0.0 if kind is t.DoubleType else 0
    for item in items:
        if not isinstance(item, kind) or isinstance(item, t.BoolType):
            raise _overload()
        acc = acc + (float(item) if kind is t.DoubleType else int(item))
        if kinds[kind] and not kinds[kind][0] <= acc <= kinds[kind][1]:
            raise SelectorError("%s overflow" % ("unsigned integer" if kind is t.UintType else "integer"))
    return kind(acc)


def _list_library(lib, functions):
    """Kubernetes' list library: isSorted, sum, min, max, indexOf, lastIndexOf (on a string they stay the string
    extension's), includes (from 1.37; the environment registers it per release)."""
    t = lib.types
    same = _equal_or_false(functions["_==_"])

    def is_sorted(value):
        items = _comparable_items(t, _as_list(t, value))
        return t.BoolType(all(_go_compare(lib, a, b) != 1 for a, b in zip(items, items[1:])))

    def extreme(name, prefer):
        def call(value, *args):
            if args:
                raise Unsupported("%s with arguments is not CEL's" % name)
            items = _comparable_items(t, _as_list(t, value))
            if not items:
                raise SelectorError("%s called on empty list" % name)
            result = items[0]
            for item in items[1:]:
                if _go_compare(lib, result, item) == prefer:
                    result = item
            return result
        return call

    def index_of(last, for_strings):
        def call(value, *args):
            if isinstance(value, t.StringType):
                return for_strings(value, *args)
            items = _as_list(t, value)
            if len(args) != 1:
                raise _overload()
            order = range(len(items) - 1, -1, -1) if last else range(len(items))
            return t.IntType(next((i for i in order if same(items[i], args[0])), -1))
        return call

    def includes(target, item):
        if isinstance(target, t.ListType):
            return t.BoolType(any(same(x, item) for x in target))
        return t.BoolType(same(target, item))

    return {"isSorted": is_sorted, "sum": lambda value: _list_sum(t, value), "min": extreme("min", 1),
            "max": extreme("max", -1), "indexOf": index_of(False, functions["indexOf"]),
            "lastIndexOf": index_of(True, functions["lastIndexOf"]), "includes": includes}


def _list_range(t, n):
    if not isinstance(n, t.IntType) or isinstance(n, t.BoolType):
        raise _overload()
    if n < 0:
        raise SelectorError("lists.range: size must be non-negative, got %d" % n)
    if n > MAX_MODELLED_LIST:
        raise Unsupported("lists.range(%d): longer than the lists modelled (cost limits)" % n)
    return t.ListType([t.IntType(i) for i in range(int(n))])


def _list_slice(t, value, start, end):
    items = _as_list(t, value)
    if not all(isinstance(n, t.IntType) and not isinstance(n, t.BoolType) for n in (start, end)):
        raise _overload()
    start, end = int(start), int(end)
    if start < 0 or end < 0:
        raise SelectorError("cannot slice(%d, %d), negative indexes not supported" % (start, end))
    if start > end:
        raise SelectorError("cannot slice(%d, %d), start index must be less than or equal to end index"
                            % (start, end))
    if len(items) < end:
        raise SelectorError("cannot slice(%d, %d), list is length %d" % (start, end, len(items)))
    return t.ListType(items[start:end])


def _list_extension(lib, functions):
    """cel-go's list extension (lists.range, reverse, slice, flatten, distinct; from 1.34)."""
    t = lib.types
    same = _equal_or_false(functions["_==_"])

    def flatten(value, *depth):
        levels = int(depth[0]) if depth else 1
        if levels < 0:
            raise SelectorError("level must be non-negative")

        def flat(items, level):
            out = []
            for item in items:
                out.extend(flat(item, level - 1) if isinstance(item, t.ListType) and level > 0 else [item])
            return out
        return t.ListType(flat(_as_list(t, value), levels))

    def distinct(value):
        out = []
        for item in _as_list(t, value):
            if not any(same(item, seen) for seen in out):
                out.append(item)
        return t.ListType(out)

    return {"lists.range": lambda n: _list_range(t, n),
            "slice": lambda value, start, end: _list_slice(t, value, start, end), "flatten": flatten,
            "distinct": distinct, "reverse": lambda value: t.ListType(list(reversed(_as_list(t, value))))}


def _list_functions(lib, functions):
    """Kubernetes' list library and cel-go's list extension, by name."""
    return dict(_list_library(lib, functions), **_list_extension(lib, functions))


MAX_MODELLED_LIST = 1000


def _equal_or_false(equal):
    """cel-go's ``a.Equal(b) == types.True`` as the list and set functions test it: an error is not equal."""
    def same(a, b):
        try:
            return bool(equal(a, b))
        except TypeError:  # a Kubernetes type against another kind: cel-go's Equal is an error
            return False
    return same


def _set_functions(lib, functions):
    """cel-go's sets extension: membership by CEL's (heterogeneous) equality."""
    t = lib.types
    same = _equal_or_false(functions["_==_"])

    def members(value):
        if not isinstance(value, t.ListType):
            raise _overload()
        return list(value)

    def has(items, item):
        return any(same(x, item) for x in items)

    def contains(a, b):
        items = members(a)
        return t.BoolType(all(has(items, x) for x in members(b)))

    def equivalent(first, second):
        return t.BoolType(bool(contains(first, second)) and bool(contains(second, first)))

    return {"sets.contains": contains, "sets.equivalent": equivalent,
            "sets.intersects": lambda a, b: t.BoolType(any(has(members(b), x) for x in members(a)))}


def _substring(text, start, end):
    start = int(start)
    stop = int(end[0]) if end else len(text)
    if start < 0 or stop > len(text) or start > stop:
        raise SelectorError("index out of range: %d" % (start if start < 0 or start > len(text) else stop))
    return text[start:stop]


def _char_at(text, index):
    if index < 0 or index > len(text):
        raise SelectorError("index out of range: %d" % index)
    return text[index:index + 1]


def _normalized_semver(text):
    """semver(text, true): a leading v dropped, missing minor/patch added, leading zeros removed."""
    text = text[1:] if text.startswith("v") else text
    core = re.match(r"^[0-9.]*", text).group(0)
    parts = [p.lstrip("0") or "0" for p in core.split(".")] if core else []
    while len(parts) < 3:
        parts.append("0")
    return ".".join(parts) + text[len(core):]
