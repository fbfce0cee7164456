"""mkdocs hooks of the docs site (mkdocs.yml `hooks:`; mkdocs 1.4).

The search plugin writes search/search_index.json, which its own script
reads with XMLHttpRequest inside a web worker. A browser refuses both to a
page opened from disk (file://), so the offline zip could not search. This
writes the same index as search/search_index.js, `var ductusSearchIndex =
{...};`, which docs/templates/search/main.js (replacing the plugin's)
loads with a <script> tag: search then works over HTTP and from disk alike.

It also removes what only a web server at the site's root could use and
what a site without `site_url` gets wrong: 404.html (its links start at
`/`) and sitemap.xml (every address "None").

And the references (docs/reference/*.md, written by `ductus reference
docs`) nest their lists by two spaces, as CommonMark and GitHub read them;
Python-Markdown, which mkdocs uses, nests by four. Their list items'
indents are doubled as the site reads them (the files are not changed).
"""

import json
import os
import re

from mkdocs.plugins import event_priority

NESTED_ITEM = re.compile(r"^((?:  )+)([-*+] |\d+\. )")


def on_page_markdown(markdown, page, **kwargs):
    if not page.file.src_uri.startswith("reference/"):
        return markdown
    lines = []
    fenced = False
    for line in markdown.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            line = NESTED_ITEM.sub(lambda m: m.group(1) * 2 + m.group(2), line)
        lines.append(line)
    return "\n".join(lines)


@event_priority(-100)  # after the search plugin has written its index
def on_post_build(config, **kwargs):
    site = config["site_dir"]
    folder = os.path.join(site, "search")
    with open(os.path.join(folder, "search_index.json"), encoding="utf-8") as f:
        index = json.load(f)
    with open(os.path.join(folder, "search_index.js"), "w", encoding="utf-8") as f:
        f.write("var ductusSearchIndex = ")
        json.dump(index, f, ensure_ascii=True, separators=(",", ":"))
        f.write(";\n")
    for name in ("404.html", "sitemap.xml", "sitemap.xml.gz"):
        path = os.path.join(site, name)
        if os.path.exists(path):
            os.remove(path)
