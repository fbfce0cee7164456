#!/usr/bin/env python3
"""Checks a built static site's internal links offline.

    scripts/check-links.py SITE_DIR

Every href and src of every HTML page under SITE_DIR that is relative
(not http:, https:, mailto:, ...) must name a file inside SITE_DIR, and a
#fragment an id (or <a name>) in the page it names. Stylesheets' url()s
must name files too. An asset loaded from elsewhere (a script, stylesheet,
image, font or frame from http(s):// or //) is an error as well: the site
must work with no network. Links to other sites (<a href="https://...">)
are left alone.

Prints each broken link as `PAGE: LINK: why`, then a summary line, and
exits 1 when any link is broken, 0 when none, 2 on a usage error.
Standard library only (scripts/docs.sh runs it; so does CI).
"""

import os
import re
import sys
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

# Attributes that load something into the page (an asset), by tag.
ASSET_ATTRS = {
    "script": ("src",),
    "img": ("src", "srcset"),
    "iframe": ("src",),
    "frame": ("src",),
    "embed": ("src",),
    "source": ("src", "srcset"),
    "audio": ("src",),
    "video": ("src", "poster"),
    "track": ("src",),
    "input": ("src",),
    "object": ("data",),
}
# <link rel=...> kinds that only point somewhere (not loaded).
LINK_RELS_NOT_ASSETS = {"canonical", "alternate", "prev", "next", "author", "license", "help", "search"}

CSS_URL = re.compile(r"""url\(\s*(['"]?)([^'")]+)\1\s*\)|@import\s+(['"])([^'"]+)\3""")


class Page(HTMLParser):
    """The ids a page defines and the links it makes: (what, url, is_asset)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        if tag in ("a", "area") and a.get("href") is not None:
            self.links.append((a["href"], False))
        elif tag == "link" and a.get("href") is not None:
            rels = set((a.get("rel") or "").lower().split())
            self.links.append((a["href"], not (rels and rels <= LINK_RELS_NOT_ASSETS)))
        for attr in ASSET_ATTRS.get(tag, ()):
            value = a.get(attr)
            if not value:
                continue
            if attr == "srcset":
                for candidate in value.split(","):
                    if candidate.strip():
                        self.links.append((candidate.strip().split()[0], True))
            else:
                self.links.append((value, True))

    handle_startendtag = handle_starttag


def is_remote(url):
    parts = urlsplit(url)
    return bool(parts.scheme) or url.startswith("//")


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr if len(argv) != 2 else sys.stdout)
        return 0 if len(argv) == 2 else 2
    site = os.path.realpath(argv[1])
    if not os.path.isdir(site):
        print(f"check-links: {argv[1]} is not a folder", file=sys.stderr)
        return 2

    pages = {}  # path relative to site -> Page
    stylesheets = []
    for folder, _, files in os.walk(site):
        for name in sorted(files):
            path = os.path.relpath(os.path.join(folder, name), site)
            if name.endswith(".html"):
                page = Page()
                with open(os.path.join(site, path), encoding="utf-8", errors="replace") as f:
                    page.feed(f.read())
                page.close()
                pages[path] = page
            elif name.endswith(".css"):
                stylesheets.append(path)
    if not pages:
        print(f"check-links: no HTML page under {argv[1]}", file=sys.stderr)
        return 1

    broken = []
    checked = 0

    def check(source, url, is_asset, html):
        """One link of `source` (a path relative to the site)."""
        nonlocal checked
        url = url.strip()
        if not url:
            return
        parts = urlsplit(url)
        if is_remote(url):
            if is_asset and parts.scheme in ("http", "https", ""):
                broken.append((source, url, "loaded from another site: the site must work with no network"))
            return  # a link to another site, mailto:, javascript:, data:
        checked += 1
        if parts.path.startswith("/"):
            broken.append((source, url, "starts at the server's root: it breaks from disk and under a sub-path"))
            return
        if parts.path:
            target = os.path.normpath(os.path.join(os.path.dirname(source), unquote(parts.path)))
        else:
            target = source  # "#fragment" or "?query" on the same page
        full = os.path.join(site, target)
        if target == ".." or target.startswith(".." + os.sep) or os.path.isabs(target):
            broken.append((source, url, "points outside the site"))
            return
        if os.path.isdir(full):
            target = os.path.join(target, "index.html")
            full = os.path.join(site, target)
        if not os.path.isfile(full):
            broken.append((source, url, f"no file {target}"))
            return
        fragment = unquote(parts.fragment)
        if fragment and html and target.endswith(".html") and fragment not in pages[target].ids:
            broken.append((source, url, f'no id "{fragment}" in {target}'))

    for path in sorted(pages):
        for url, is_asset in pages[path].links:
            check(path, url, is_asset, True)
    for path in sorted(stylesheets):
        with open(os.path.join(site, path), encoding="utf-8", errors="replace") as f:
            text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
        for m in CSS_URL.finditer(text):
            url = m.group(2) or m.group(4)
            if not url.startswith("data:"):
                check(path, url, True, False)

    for source, url, why in broken:
        print(f"{source}: {url}: {why}")
    print(
        f"check-links: {len(pages)} pages, {len(stylesheets)} stylesheets, {checked} internal links: "
        + (f"{len(broken)} broken or loaded from another site" if broken else "none broken")
    )
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
