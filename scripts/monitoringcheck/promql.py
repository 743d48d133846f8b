"""PromQL, as far as the checks need it: which metric names an
expression (or a Grafana variable query) selects, Grafana variables
replaced so that PromQL parsers accept the expression.

Pure functions of strings. Must not run promtool or read files: parsing
for real is promtool's job (rules).
"""

import re

# Functions (as of Prometheus 2.x/3.x) and aggregation operators.
FUNCTIONS = set("""
abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time ceil changes
clamp clamp_max clamp_min cos cosh count_over_time days_in_month day_of_month day_of_week
day_of_year deg delta deriv double_exponential_smoothing exp floor group histogram_avg
histogram_count histogram_fraction histogram_quantile histogram_stddev histogram_stdvar
histogram_sum holt_winters hour idelta increase info irate label_join label_replace last_over_time
ln log10 log2 mad_over_time max_over_time min_over_time minute month pi predict_linear
present_over_time quantile_over_time rad rate resets round scalar sgn sin sinh sort sort_by_label
sort_by_label_desc sort_desc sqrt stddev_over_time stdvar_over_time sum_over_time tan tanh time
timestamp vector year
sum min max avg stddev stdvar count count_values bottomk topk quantile limitk limit_ratio
""".split())
# Words that are never metric names wherever they stand.
KEYWORDS = set("""
by without on ignoring group_left group_right bool and or unless offset atan2 start end
sum min max avg group stddev stdvar count count_values bottomk topk quantile limitk limit_ratio
""".split())

STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
NAME_MATCHER = re.compile(r'__name__\s*=\s*("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\')')
GRAFANA_VAR = re.compile(r"\$\{[^}]*\}|\[\[[^\]]*\]\]|\$\w+")
LABEL_LIST = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
IDENT = re.compile(r"(?<![\w:.])([A-Za-z_:][\w:]*)")


def replace_grafana_vars(expr):
    """Grafana variables as PromQL can parse them: intervals become 5m, others 1."""

    def sub(m):
        v = m.group(0)
        return "5m" if ("interval" in v or "range" in v) else "1"

    # Inside strings (label matchers) a variable must stay a string.
    out, pos = [], 0
    for m in STRING.finditer(expr):
        out.append(GRAFANA_VAR.sub(sub, expr[pos:m.start()]))
        out.append(GRAFANA_VAR.sub(".*", m.group(0)))
        pos = m.end()
    out.append(GRAFANA_VAR.sub(sub, expr[pos:]))
    return "".join(out)


def metric_names(expr):
    """(names, problems): the metric names an expression selects."""
    names, problems = set(), []
    expr = replace_grafana_vars(expr)
    for m in NAME_MATCHER.finditer(expr):
        names.add(m.group(1)[1:-1])
    if re.search(r"__name__\s*(=~|!=|!~)", expr):
        problems.append("__name__ matched by regex or negation: cannot check it")
    s = STRING.sub('""', expr)
    s = re.sub(r"#[^\n]*", " ", s)  # comments
    s = re.sub(r"\{[^{}]*\}", " {} ", s)  # label matchers
    s = re.sub(r"\[[^\[\]]*\]", " ", s)  # ranges, subqueries
    s = LABEL_LIST.sub(r" \1 ", s)  # by (...), on (...), group_left (...)
    for m in IDENT.finditer(s):
        word = m.group(1)
        rest = s[m.end():].lstrip()
        if word in KEYWORDS or word.lower() in ("inf", "nan"):
            continue
        if rest.startswith("("):
            if word not in FUNCTIONS:
                problems.append(f"unknown function {word}()")
            continue
        names.add(word)
    return names, problems


def variable_query_names(query):
    """Names in a Grafana Prometheus variable query (label_values, query_result, metrics)."""
    q = query.strip()
    m = re.fullmatch(r"label_values\((.*),\s*([\w.]+)\s*\)", q, re.S)
    if m:
        return metric_names(m.group(1))
    if re.fullmatch(r"label_values\(\s*[\w.]+\s*\)", q) or q.startswith("label_names(") or q.startswith("metrics("):
        return set(), []
    m = re.fullmatch(r"query_result\((.*)\)", q, re.S)
    if m:
        return metric_names(m.group(1))
    return set(), [f"unrecognised variable query {q!r}"]
