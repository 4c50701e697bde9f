#!/usr/bin/env python3
"""The manual's links, checked where a reader follows them.

  scripts/book-links.py [BOOK_HTML_DIR]   (default target/book, what `mdbook build docs` wrote)

- In the rendered book: every relative `href`/`src` of every page names a file the book
  has, and its `#fragment` an `id` in that page (mdBook's own anchors, not a guess).
- README.md stays a front door: at most 300 lines (the manual holds the rest).
- In the Markdown: every relative link of README.md (read on the forge, outside the
  book) and of docs/**/*.md names a file that exists; every page under docs/ is in
  docs/SUMMARY.md and every SUMMARY entry exists (a page left out is never built).
Exit 1 with one line per broken link.
"""
import glob
import html.parser
import os
import re
import sys
import urllib.parse

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))


class Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k == "id" and v:
                self.ids.add(v)
            if k in ("href", "src") and v and tag in ("a", "img"):
                self.links.append(v)


def parse(path, cache={}):
    if path not in cache:
        p = Links()
        with open(path, encoding="utf-8") as f:
            p.feed(f.read())
        cache[path] = p
    return cache[path]


def relative(url):
    return not re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:|//", url) and not url.startswith("data:")


def check_html(book):
    bad = []
    pages = [p for p in glob.glob(os.path.join(book, "**", "*.html"), recursive=True)
             if os.path.basename(p) not in ("print.html", "toc.html", "404.html")]
    if not pages:
        return [f"{book}: no pages (run `mdbook build docs` first)"], 0
    n = 0
    for page in pages:
        for url in parse(page).links:
            if not relative(url) or url.startswith("#") and url == "#":
                continue
            n += 1
            path, _, frag = url.partition("#")
            target = os.path.normpath(os.path.join(os.path.dirname(page), urllib.parse.unquote(path))) if path else page
            if not os.path.exists(target):
                bad.append(f"{os.path.relpath(page, book)}: {url}: no such file in the book")
            elif frag and target.endswith(".html") and urllib.parse.unquote(frag) not in parse(target).ids:
                bad.append(f"{os.path.relpath(page, book)}: {url}: no anchor #{frag} in {os.path.relpath(target, book)}")
    return bad, n


def strip_code(text):
    text = re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def check_markdown():
    bad, n = [], 0
    files = sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    for f in files + [os.path.join(ROOT, "README.md")]:
        text = strip_code(open(f, encoding="utf-8").read())
        for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text):
            url = m.group(1)
            if not relative(url) or url.startswith("#"):
                continue
            n += 1
            path = urllib.parse.unquote(url.partition("#")[0])
            if not os.path.exists(os.path.normpath(os.path.join(os.path.dirname(f), path))):
                line = text[: m.start()].count("\n") + 1
                bad.append(f"{os.path.relpath(f, ROOT)}:{line}: {url}: no such file")
    summary = open(os.path.join(ROOT, "docs", "SUMMARY.md"), encoding="utf-8").read()
    entries = set(re.findall(r"\]\(([^)#]+)\)", summary))
    for e in sorted(entries):
        if not os.path.exists(os.path.join(ROOT, "docs", e)):
            bad.append(f"docs/SUMMARY.md: {e}: no such page")
    for f in files:
        r = os.path.relpath(f, os.path.join(ROOT, "docs"))
        if r != "SUMMARY.md" and r not in entries:
            bad.append(f"docs/{r}: not in docs/SUMMARY.md (never built)")
    return bad, n


def main():
    book = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target", "book")
    bad_html, n_html = check_html(book)
    bad_md, n_md = check_markdown()
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().count("\n")
    if readme > 300:
        bad_md.append(f"README.md: {readme} lines, over the front door's 300: move sections to docs/")
    for b in bad_html + bad_md:
        print(b)
    print(f"book links: {n_html} in the rendered book, {n_md} in the Markdown; "
          f"{len(bad_html) + len(bad_md)} broken")
    return 1 if bad_html or bad_md else 0


if __name__ == "__main__":
    sys.exit(main())
