"""What an implementation of each exercise looks like in code, to find one where none should be: tests/test_course.py
checks that no function of the student copy (tests included) but the stubs computes an exercise, so that no shipped
test hands out a solution, and that each fingerprint does recognise the real solution and the hidden references.

A fingerprint is a list of regular expressions that must all match one function's code, with its comments and
docstrings removed and its tokens joined by single spaces ("gamma*lam" reads "gamma * lam")."""
import ast
import io
import re
import textwrap
import tokenize

FINGERPRINTS = {  # exercise id -> [fingerprint, ...]
    # a box leaves one cell for the next: (boxes - {ahead}) | {beyond}
    "ex1-sokoban": [[r"- \{ \w+ \} (\) )?\| \{"]],
    # the answer split on "||", its pieces matched case-insensitively
    "ex2-parser": [[r"split \( (\"\|\|\"|'\|\|') \)", r"\. lower \( \)"]],
    # the last sampled token found, and the KL term
    "ex3-token-rewards": [[r"\blast\b = .*(argmax|max \(|\[ - 1 \])", r"\bkl\b"]],
    # the GAE recursion
    "ex4-gae": [[r"gamma \* lam"]],
    # a centred reward over the group's std plus eps
    "ex5-grpo": [[r"std.{0,40}\+ (eps|1e-0?6) \)"]],
    # the pessimistic max of the two surrogates, or the asymmetric clip of the ratio
    "ex6-policy-loss": [[r"max(imum)? \( - \w+ \* \w+ , - \w+ \*"],
                        [r"(clamp|clip) \( (\w+ , )?1(\.0)? - clip_low , 1(\.0)? \+ clip_high \)"],
                        [r"min \( max \( \w+ , (1 - clip_low|0\.8) \) , (1 \+ clip_high|1\.28) \)"],
                        [r"clamp \( 0\.8 , 1\.28 \)"]],
    # half the larger squared error, or the value clipped around its old value
    "ex7-value-loss": [[r"0\.5 \* (np \. |torch \. )?max(imum)? \("],
                       [r"(clamp|clip) \( .{0,40}- (c|clip_range) , .{0,40}\+ (c|clip_range) \)"]],
    # how many groups are kept, and the groups sorted
    "ex8-filter": [[r"max \( 1 , int \(", r"\bsort(ed)?\b"]],
    # the template's closing text cut after a reply that closed its turn itself
    "ex9-response-mask": [[r"close_assistant", r"(\[ len \(|removeprefix \().{0,80}end_of_turn"]],
    # logits over the temperature, then a log-softmax; or the states shifted one against the tokens
    "ex10-logprobs": [[r"/ (\w+ \. )*(temperature|T)\b", r"log_softmax|logsumexp|log \( sum \( .{0,40}exp"],
                      [r"\[ : , : - 1 \]", r"\[ : , 1 : \]"]],
    # a micro-batch's count times the number of micro-batches, or the mean of micro-batch means
    "ex11-loss-normalizer": [[r"token-mean", r"\* (num_micro_batches|len \( \w+ \))"],
                             [r"/ len \( \w+ \)", r"\. sum \( \) / .{0,60}\. sum \( \)"]],
    # a new order every epoch, cut into mini-batches
    "ex12-update": [[r"randperm", r"range \( 0 , \w+ , [\w .]*mini_batch_size \)"]],
}


def code_of(source):
    """The source's tokens joined by single spaces, without comments and docstrings (string statements)."""
    out, start_of_line = [], True
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    for i, tok in enumerate(tokens):
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            continue
        if tok.type == tokenize.NEWLINE:
            start_of_line = True
            out.append("\n")
            continue
        following = next((t for t in tokens[i + 1:] if t.type not in (tokenize.COMMENT, tokenize.NL)), None)
        if tok.type == tokenize.STRING and start_of_line and following is not None and following.type in (
                tokenize.NEWLINE, tokenize.ENDMARKER):
            continue  # a docstring: the specification, not code
        start_of_line = False
        out.append(tok.string)
    return re.sub(r" *\n *", "\n", " ".join(out))


def functions(source):
    """(name, code) of every function and lambda in the source (nested ones on their own too) and of the module's
    top-level code: a reference may hide in any of them."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    found = [("<module>", code_of("".join(line for node in tree.body if not isinstance(
        node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        for line in lines[node.lineno - 1:node.end_lineno])))]
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            text = "".join(lines[node.lineno - 1:node.end_lineno])
            found.append((node.name, code_of(textwrap.dedent(text))))
    return found


def matches(code):
    """The exercises whose fingerprint this code matches."""
    flat = code.replace("\n", " ")
    return [exercise for exercise, prints in FINGERPRINTS.items()
            if any(all(re.search(pattern, flat) for pattern in fingerprint) for fingerprint in prints)]


def implementations(source):
    """[(function name, exercise)] of the functions in this source that look like an exercise's implementation."""
    return [(name, exercise) for name, code in functions(source) for exercise in matches(code)]
