// The docs site's search box: replaces the mkdocs search plugin's
// search/main.js (a theme's custom_dir wins over the plugin's files).
//
// The plugin's script builds the index in a web worker that reads
// search/search_index.json with XMLHttpRequest; a browser refuses both to a
// page opened from disk (file://). This one runs in the page and loads
// lunr and the index with <script> tags (search/search_index.js, written by
// docs/templates/hooks.py), so the same site searches over HTTP from any
// static server and from the unpacked zip, with no network either way. The
// index was built by mkdocs (prebuild_index), so loading it is all the
// browser does; it is loaded the first time the search box is used.
(function () {
  'use strict';

  var index = null; // lunr.Index, once loaded
  var docs = {}; // location -> { location, title, text }
  var minLength = 3;
  var waiting = [];
  var loading = false;

  function siteUrl(path) {
    return base_url.replace(/\/$/, '') + '/' + path;
  }

  function loadScript(src, done) {
    var s = document.createElement('script');
    s.src = src;
    s.onload = done;
    s.onerror = function () {
      showMessage('The search index could not be loaded (' + src + ').');
    };
    document.head.appendChild(s);
  }

  function whenLoaded(fn) {
    if (index) {
      fn();
      return;
    }
    waiting.push(fn);
    if (loading) return;
    loading = true;
    loadScript(siteUrl('search/lunr.js'), function () {
      loadScript(siteUrl('search/search_index.js'), function () {
        var data = window.ductusSearchIndex;
        var config = data.config || {};
        if (config.separator) lunr.tokenizer.separator = new RegExp(config.separator);
        if (config.min_search_length) minLength = config.min_search_length;
        data.docs.forEach(function (d) {
          docs[d.location] = d;
        });
        if (data.index) {
          index = lunr.Index.load(data.index);
        } else {
          index = lunr(function () {
            this.field('title');
            this.field('text');
            this.ref('location');
            data.docs.forEach(function (d) {
              this.add(d);
            }, this);
          });
        }
        var fns = waiting;
        waiting = [];
        fns.forEach(function (f) {
          f();
        });
      });
    });
  }

  function escapeHtml(value) {
    return value
      .replace(/&/g, '&amp;')
      .replace(/"/g, '&quot;')
      .replace(/</g, '&lt;')
      .replace(/>/g, '&gt;');
  }

  // About 200 characters of the text around the first word of the query
  // it holds, else its beginning.
  function summary(text, query) {
    var lower = text.toLowerCase();
    var at = -1;
    query
      .toLowerCase()
      .split(/[\s\-]+/)
      .forEach(function (word) {
        word = word.replace(/[^a-z0-9_.]/g, '');
        if (word.length < 2 || at >= 0) return;
        at = lower.indexOf(word);
      });
    var start = Math.max(0, at - 60);
    var s = text.substring(start, start + 200);
    return (start > 0 ? '…' : '') + s + (start + 200 < text.length ? '…' : '');
  }

  function results() {
    return document.getElementById('mkdocs-search-results');
  }

  function showMessage(text) {
    var el = results();
    if (el) el.innerHTML = '<p>' + escapeHtml(text) + '</p>';
  }

  function display(found, query) {
    var el = results();
    if (!el) return;
    if (found.length === 0) {
      showMessage(el.getAttribute('data-no-results-text') || 'No results found');
      return;
    }
    el.innerHTML = found
      .map(function (d) {
        // A section of a page: say which page.
        var page = docs[d.location.split('#')[0]];
        var where = page && page !== d && page.title !== d.title
          ? '<p class="search-page">' + escapeHtml(page.title) + '</p>'
          : '';
        return (
          '<article><h3><a href="' + escapeHtml(siteUrl(d.location)) + '">' + escapeHtml(d.title) +
          '</a></h3>' + where + '<p>' + escapeHtml(summary(d.text, query)) + '</p></article>'
        );
      })
      .join('');
  }

  function search(query) {
    var hits;
    try {
      hits = index.search(query);
    } catch (e) {
      // lunr's query syntax (field:, term~1, +must): text a reader types
      // that is not valid in it is searched as plain words.
      hits = index.search(query.replace(/[:~^*+\-]/g, ' '));
    }
    return hits
      .map(function (h) {
        return docs[h.ref];
      })
      .filter(Boolean);
  }

  function doSearch() {
    var input = document.getElementById('mkdocs-search-query');
    var query = input.value.trim();
    if (query.length < minLength) {
      var el = results();
      if (el) el.innerHTML = '';
      return;
    }
    whenLoaded(function () {
      if (input.value.trim() === query) display(search(query), query);
    });
  }

  function queryFromLocation() {
    var m = /[?&]q=([^&]*)/.exec(window.location.search);
    return m ? decodeURIComponent(m[1].replace(/\+/g, ' ')) : '';
  }

  function init() {
    var input = document.getElementById('mkdocs-search-query');
    if (!input) return;
    input.addEventListener('input', doSearch);
    input.addEventListener('keyup', doSearch);
    input.addEventListener('focus', function () {
      whenLoaded(function () {});
    });
    // Enter would submit the theme's form and reload the page.
    if (input.form) {
      input.form.addEventListener('submit', function (e) {
        e.preventDefault();
        doSearch();
      });
    }
    var term = queryFromLocation();
    if (term) {
      input.value = term;
      doSearch();
    }
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
