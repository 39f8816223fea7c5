// The web page of `rangefs ui`: one HTML document, its style sheet and its script (UIPage+Script.swift), all in the
// binary: no CDN, no library, nothing from the internet, so it works offline. Plain HTML, CSS and JS: the page
// needs a list, bars and two canvases, which a library would not make smaller. It reads in light and dark
// (prefers-color-scheme), fits a phone's width (each file's row wraps to two lines), and is used from the
// keyboard: `/` to the filter, arrows through the files, buttons for the actions.
//
// The token sits in a meta tag for the script's POST header; the page itself is served only to a browser holding
// the cookie, and another site cannot read it (no CORS header).

/// The page's text.
enum UIPage {
    /// The document, with `token` (hex digits only) for the script's actions.
    static func html(token: String) -> String {
        """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="rangefs-token" content="\(token)">
        <title>rangefs</title>
        <link rel="stylesheet" href="/app.css">
        </head>
        <body>
        <header>
          <h1>rangefs</h1>
          <span id="live" role="status" aria-live="polite">connecting…</span>
        </header>
        <section id="mounts" aria-label="Mounts"></section>
        <section id="controls" aria-label="Filter, sort and add">
          <label>Filter <input id="filter" type="search" placeholder="name (press /)" autocomplete="off"></label>
          <label>State <select id="stateFilter">
            <option value="">all</option><option value="active">not complete</option><option>downloading</option>
            <option>queued</option><option>paused</option><option>partial</option><option>complete</option>
            <option>error</option><option>empty</option></select></label>
          <label>Sort <select id="sort">
            <option value="name">name</option><option value="progress">progress</option>
            <option value="speed">speed</option><option value="size">size</option><option value="state">state</option>
            </select></label>
          <form id="add">
            <select id="addMount" aria-label="Mount to add to"></select>
            <input id="addUrl" type="text" placeholder="URL to add (mirrors, sha256=…)" aria-label="URL to add" required>
            <button type="submit">Add</button>
          </form>
        </section>
        <p id="message" role="alert"></p>
        <main>
          <div id="list" role="listbox" tabindex="0" aria-label="Files (arrow keys to move)">
            <div id="spacer"></div>
          </div>
          <aside id="detail" aria-label="Selected file" hidden>
            <h2 id="detailName"></h2>
            <canvas id="fineMap" height="40" aria-label="Block map"></canvas>
            <dl id="detailFacts"></dl>
            <div id="actions">
              <button data-command="pause">Pause</button><button data-command="resume">Resume</button>
              <button data-command="pin">Pin</button><button data-command="evict">Evict</button>
              <button data-command="verify">Verify</button><button data-command="rm">Remove</button>
            </div>
          </aside>
        </main>
        <script src="/app.js"></script>
        </body>
        </html>
        """
    }

    /// The style sheet: colours as variables, dark when the system is.
    static let css = """
        :root { --bg: #fafafa; --fg: #1b1f24; --muted: #5b6470; --line: #d6dae0; --card: #fff; --accent: #1f6feb;
          --have: #2da44e; --part: #9be9a8; --none: #e6e9ed; --error: #cf222e; --sel: #dbe9ff; color-scheme: light dark; }
        @media (prefers-color-scheme: dark) {
          :root { --bg: #0d1117; --fg: #e6edf3; --muted: #9aa4b0; --line: #30363d; --card: #161b22; --accent: #58a6ff;
            --have: #3fb950; --part: #1f6f36; --none: #262c34; --error: #ff7b72; --sel: #1c2d45; } }
        * { box-sizing: border-box; }
        [hidden] { display: none !important; }
        body { margin: 0; padding: 0.5rem 1rem 1rem; background: var(--bg); color: var(--fg);
          font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; }
        header { display: flex; align-items: baseline; gap: 1rem; }
        h1 { font-size: 1.25rem; margin: 0.25rem 0; }
        h2 { font-size: 1rem; margin: 0 0 0.5rem; word-break: break-all; }
        #live { color: var(--muted); }
        #mounts { display: grid; grid-template-columns: repeat(auto-fit, minmax(18rem, 1fr)); gap: 0.5rem; margin: 0.5rem 0; }
        .mount { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 0.5rem 0.75rem; }
        .mount .point { font-weight: 600; word-break: break-all; }
        .mount .totals, .mount .recent { color: var(--muted); font-size: 0.85rem; }
        .mount .recent { white-space: pre-wrap; max-height: 5em; overflow: auto; }
        .mount canvas { width: 100%; height: 48px; display: block; margin-top: 0.25rem; }
        .errors { color: var(--error); }
        #controls { display: flex; flex-wrap: wrap; gap: 0.5rem 1rem; align-items: center; margin: 0.5rem 0; }
        #add { display: flex; gap: 0.25rem; flex: 1 1 20rem; }
        #addUrl { flex: 1; min-width: 8rem; }
        input, select, button { font: inherit; color: inherit; background: var(--card); border: 1px solid var(--line);
          border-radius: 4px; padding: 0.25rem 0.5rem; }
        button { cursor: pointer; }
        button:hover { border-color: var(--accent); }
        :focus-visible { outline: 2px solid var(--accent); outline-offset: 1px; }
        #message { min-height: 1.4em; margin: 0.25rem 0; color: var(--muted); }
        #message.failed { color: var(--error); }
        main { display: flex; gap: 1rem; align-items: flex-start; }
        #list { position: relative; flex: 1 1 auto; min-width: 0; height: calc(100vh - 15rem); min-height: 16rem;
          overflow-y: auto; background: var(--card); border: 1px solid var(--line); border-radius: 6px; }
        .row { position: absolute; left: 0; right: 0; height: 52px; padding: 4px 8px; border-bottom: 1px solid var(--line);
          display: grid; grid-template-columns: 1fr auto auto auto; grid-template-rows: 22px 18px; column-gap: 0.75rem;
          cursor: pointer; }
        .row[aria-selected="true"] { background: var(--sel); }
        .row .name { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
        .row .state, .row .speed, .row .eta { color: var(--muted); white-space: nowrap; font-variant-numeric: tabular-nums; }
        .row .state.error { color: var(--error); }
        .pin { font-size: 0.75rem; border: 1px solid var(--accent); color: var(--accent); border-radius: 3px;
          padding: 0 0.25rem; margin-left: 0.4rem; }
        .row .barline { grid-column: 1 / 4; display: flex; gap: 0.5rem; align-items: center; }
        .bar { flex: 1; height: 8px; background: var(--none); border-radius: 4px; overflow: hidden; }
        .bar > div { height: 100%; width: 0; background: var(--have); }
        .pct { width: 3.5rem; text-align: right; font-variant-numeric: tabular-nums; color: var(--muted); }
        .row canvas { grid-column: 4; width: 100px; height: 12px; align-self: center; }
        #detail { flex: 0 0 24rem; background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 0.75rem; }
        #fineMap { width: 100%; height: 40px; display: block; margin-bottom: 0.5rem; }
        dl { display: grid; grid-template-columns: auto 1fr; gap: 0.15rem 0.75rem; margin: 0 0 0.5rem; }
        dt { color: var(--muted); }
        dd { margin: 0; word-break: break-all; }
        #actions { display: flex; flex-wrap: wrap; gap: 0.25rem; }
        @media (max-width: 760px) {
          body { padding: 0.5rem; }
          main { flex-direction: column; }
          #detail { flex: none; width: 100%; }
          #list { width: 100%; height: 60vh; }
          .row { grid-template-columns: 1fr auto auto; }
          .row .eta { display: none; }
          .row .barline { grid-column: 1 / 3; }
          .row canvas { grid-column: 3; width: 64px; }
        }
        """
}
