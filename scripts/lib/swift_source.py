"""Reading Swift source for the shape scripts (scripts/type-sizes, scripts/function-lengths):
a line without its comments and string literals, so that their braces do not count."""
import re

_RAW = re.compile(r'(#+)"')


def strip(line, state):
    """The line without comments and string literals. `state` carries a multi-line string
    literal across lines: pass the same dict for every line of a file."""
    if state["multiline"]:
        if '"""' in line:
            state["multiline"] = False
            line = line.split('"""', 1)[1]
        else:
            return ""
    out = []
    i = 0
    while i < len(line):
        if line.startswith("//", i):
            break
        if line.startswith('"""', i):
            rest = line[i + 3:]
            if '"""' in rest:
                i = i + 3 + rest.index('"""') + 3
                continue
            state["multiline"] = True
            break
        m = _RAW.match(line, i)
        if m:
            close = '"' + m.group(1)
            end = line.find(close, i + len(m.group(0)))
            i = len(line) if end < 0 else end + len(close)
            out.append('""')
            continue
        if line[i] == '"':
            i = _string_end(line, i)
            out.append('""')
            continue
        out.append(line[i])
        i += 1
    return "".join(out)


def _string_end(line, i):
    """The index after the string literal that starts at `i` (interpolations included)."""
    j = i + 1
    depth = 0
    while j < len(line):
        if line[j] == "\\" and j + 1 < len(line) and line[j + 1] == "(":
            depth += 1
            j += 2
            continue
        if depth and line[j] == ")":
            depth -= 1
        elif not depth and line[j] == "\\":
            j += 2
            continue
        elif not depth and line[j] == '"':
            break
        j += 1
    return j + 1

