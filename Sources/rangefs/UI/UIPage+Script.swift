// The page's script. It keeps every file the event stream sent in one Map, and draws only the rows in view (a
// pool of absolutely placed rows over a spacer as tall as the list), so 10,000 files scroll as 20 do. Each event
// (at least one a second) merges what changed and schedules one redraw. The selected file's fine block map is
// asked for (`/api/blockmap`) once per event while it is shown. Rows carry what they show in data attributes
// (cached bytes, state, the map's filled share) so a test can read them from the DOM.

extension UIPage {
    static let script = #"""
        "use strict";
        const token = document.querySelector('meta[name="rangefs-token"]').content;
        const ROW = 52, MAPCELLS = { " ": 0, ".": 1, ":": 2, "#": 3 };
        const files = new Map();          // "mount/name" -> file
        let mounts = [], view = [], selectedKey = null, drawPending = false, ready = false, fineWidth = 0;
        const history = new Map();        // mount index -> [[seconds, total speed]], one per event
        const $ = (id) => document.getElementById(id);
        const list = $("list"), spacer = $("spacer"), pool = [];

        function bytes(value) {
          const units = ["B", "KiB", "MiB", "GiB", "TiB"];
          let unit = 0;
          while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit++; }
          return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
        }
        function duration(seconds) {
          const total = Math.round(seconds);
          if (total >= 3600) return `${Math.floor(total / 3600)}h${Math.floor(total % 3600 / 60)}m`;
          return total >= 60 ? `${Math.floor(total / 60)}m${total % 60}s` : `${total}s`;
        }
        const share = (f) => f.size === 0 ? 1 : f.cached / f.size;
        const color = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

        // The list in view: filtered by name and state, sorted.
        function rebuildView() {
          const text = $("filter").value.toLowerCase(), state = $("stateFilter").value, sort = $("sort").value;
          view = [];
          for (const [key, f] of files) {
            if (text && !f.name.toLowerCase().includes(text)) continue;
            const quiet = f.state === "complete" || f.state === "empty";
            if (state === "active" ? quiet : state && f.state !== state) continue;
            view.push(key);
          }
          const by = {
            name: (a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : a.mount - b.mount,
            progress: (a, b) => share(b) - share(a),
            speed: (a, b) => b.speed - a.speed,
            size: (a, b) => b.size - a.size,
            state: (a, b) => a.state < b.state ? -1 : a.state > b.state ? 1 : 0,
          }[sort];
          view.sort((a, b) => by(files.get(a), files.get(b)) || (a < b ? -1 : 1));
          spacer.style.height = `${view.length * ROW}px`;
        }

        function drawMap(canvas, levels, maximum) {
          const width = canvas.width = Math.max(1, Math.round(canvas.clientWidth * devicePixelRatio));
          const height = canvas.height = Math.max(1, Math.round(canvas.clientHeight * devicePixelRatio));
          const context = canvas.getContext("2d");
          context.fillStyle = color("--none");
          context.fillRect(0, 0, width, height);
          let filled = 0;
          const step = width / Math.max(1, levels.length);
          levels.forEach((level, index) => {
            filled += level;
            if (level === 0) return;
            context.fillStyle = level === maximum ? color("--have") : color("--part");
            context.fillRect(Math.floor(index * step), 0, Math.ceil(step), height);
          });
          canvas.dataset.filled = String(filled / (maximum * Math.max(1, levels.length)));
        }

        function makeRow() {
          const row = document.createElement("div");
          row.className = "row";
          row.setAttribute("role", "option");
          row.innerHTML = '<span class="name"></span><span class="state"></span><span class="speed"></span>' +
            '<span class="eta"></span><span class="barline"><span class="bar"><div></div></span>' +
            '<span class="pct"></span></span><canvas></canvas>';
          row.addEventListener("click", () => select(row.dataset.key));
          list.appendChild(row);
          return row;
        }

        // Only the rows in view exist; they are reused as the list scrolls.
        function drawRows() {
          const first = Math.max(0, Math.floor(list.scrollTop / ROW) - 2);
          const count = Math.ceil(list.clientHeight / ROW) + 4;
          while (pool.length < count) pool.push(makeRow());
          pool.forEach((row, slot) => {
            const key = view[first + slot], f = key && files.get(key);
            if (!f) { row.hidden = true; row.dataset.key = ""; return; }
            row.hidden = false;
            row.style.top = `${(first + slot) * ROW}px`;
            row.id = `row-${first + slot}`;
            row.dataset.key = key;
            row.dataset.name = f.name;
            row.dataset.mount = String(f.mount);
            row.dataset.cached = String(f.cached);
            row.dataset.size = String(f.size);
            row.dataset.state = f.state;
            row.setAttribute("aria-selected", String(key === selectedKey));
            const label = mounts.length > 1 ? `${mounts[f.mount].mountpoint}/${f.name}` : f.name;
            row.children[0].textContent = label;
            if (f.pinned) {
              const badge = document.createElement("span");
              badge.className = "pin";
              badge.textContent = "pinned";
              row.children[0].append(badge);
            }
            row.children[0].title = label;
            row.children[1].textContent = f.state;
            row.children[1].className = "state" + (f.state === "error" ? " error" : "");
            row.children[2].textContent = f.speed > 0 ? `${bytes(Math.round(f.speed))}/s` : "";
            row.children[3].textContent = f.eta != null ? duration(f.eta) : "";
            row.querySelector(".bar > div").style.width = `${(share(f) * 100).toFixed(1)}%`;
            row.querySelector(".pct").textContent = `${(share(f) * 100).toFixed(1)}%`;
            drawMap(row.lastChild, [...f.map].map((c) => MAPCELLS[c] ?? 0), 3);
          });
          const selected = view.indexOf(selectedKey);
          list.setAttribute("aria-activedescendant", selected >= 0 ? `row-${selected}` : "");
        }

        function drawMounts() {
          const box = $("mounts");
          while (box.children.length < mounts.length) {
            const card = document.createElement("div");
            card.className = "mount";
            card.innerHTML = '<div class="point"></div><div class="totals"></div><canvas aria-label="Speed"></canvas>' +
              '<div class="recent"></div>';
            box.appendChild(card);
          }
          mounts.forEach((m, index) => {
            const card = box.children[index];
            card.children[0].textContent = m.mountpoint;
            card.children[1].innerHTML = "";
            const totals = `${m.files} file${m.files === 1 ? "" : "s"}, ${bytes(m.cached)} of ${bytes(m.size)} local` +
              (m.speed > 0 ? `, ${bytes(Math.round(m.speed))}/s` : "");
            card.children[1].append(totals);
            if (m.errors > 0 || m.problem) {
              const errors = document.createElement("span");
              errors.className = "errors";
              errors.textContent = m.problem ? ` — ${m.problem}` : `, ${m.errors} in error`;
              card.children[1].append(errors);
            }
            card.children[3].textContent = [...m.warnings.map((w) => "warning: " + w), ...m.recent].join("\n");
            drawGraph(card.children[2], history.get(index) || []);
          });
          const choose = $("addMount");
          if (choose.options.length !== mounts.length) {
            choose.innerHTML = "";
            mounts.forEach((m, index) => choose.add(new Option(m.mountpoint, String(index))));
            choose.hidden = mounts.length < 2;
          }
        }

        // The last GRAPH seconds of a mount's total speed, one point per event, placed by its time.
        const GRAPH = 120;
        function drawGraph(canvas, points) {
          const width = canvas.width = Math.max(1, Math.round(canvas.clientWidth * devicePixelRatio));
          const height = canvas.height = Math.max(1, Math.round(canvas.clientHeight * devicePixelRatio));
          const context = canvas.getContext("2d"), now = performance.now() / 1000;
          const top = Math.max(1, ...points.map((point) => point[1]));
          context.strokeStyle = color("--accent");
          context.lineWidth = devicePixelRatio;
          context.beginPath();
          points.forEach(([time, value], index) => {
            const x = width - (now - time) / GRAPH * width, y = height - 2 - value / top * (height - 4);
            index === 0 ? context.moveTo(x, y) : context.lineTo(x, y);
          });
          context.stroke();
          context.fillStyle = color("--muted");
          context.font = `${10 * devicePixelRatio}px system-ui`;
          context.fillText(`last ${GRAPH / 60} min, peak ${bytes(Math.round(top))}/s`, 4, 12 * devicePixelRatio);
          canvas.dataset.latest = String(points.length ? points[points.length - 1][1] : 0);
        }

        function drawDetail() {
          const f = selectedKey && files.get(selectedKey), panel = $("detail");
          if (!f) { panel.hidden = true; return; }
          panel.hidden = false;
          panel.dataset.key = selectedKey;
          $("detailName").textContent = f.name;
          const facts = [["URL", f.url], ["size", bytes(f.size)],
            ["local", `${bytes(f.cached)} (${(share(f) * 100).toFixed(1)}%)`],
            ["state", f.state + (f.pinned ? ", pinned" : "")],
            ["speed", f.speed > 0 ? `${bytes(Math.round(f.speed))}/s` : "–"],
            ["ETA", f.eta != null ? duration(f.eta) : "–"], ["digest", f.digest], ["note", f.note],
            ["last error", f.error],
            ...f.mirrors.map((m, i) => [i === 0 ? "mirrors" : "", m])];
          const list = $("detailFacts");
          list.innerHTML = "";
          for (const [term, value] of facts) {
            if (value == null || value === "") continue;
            const dt = document.createElement("dt"), dd = document.createElement("dd");
            dt.textContent = term;
            dd.textContent = value;
            list.append(dt, dd);
          }
          fetchFineMap(f);
        }

        async function fetchFineMap(f) {
          const canvas = $("fineMap");
          fineWidth = Math.min(4096, Math.max(16, Math.round(canvas.clientWidth * devicePixelRatio)));
          const query = `mount=${f.mount}&name=${encodeURIComponent(f.name)}&width=${fineWidth}`;
          try {
            const response = await fetch(`/api/blockmap?${query}`, { headers: { "X-Rangefs-Token": token } });
            const answer = await response.json();
            if (!answer.ok || `${f.mount}/${f.name}` !== selectedKey) return;
            drawMap(canvas, [...answer.message].map(Number), 9);
            canvas.dataset.key = selectedKey;
          } catch (error) { /* the next event asks again */ }
        }

        function draw() {
          drawPending = false;
          rebuildView();
          drawMounts();
          drawRows();
          drawDetail();
          if (!ready) {
            ready = true;
            document.documentElement.dataset.ready = String(Math.round(performance.now()));
          }
        }
        const schedule = () => { if (!drawPending) { drawPending = true; requestAnimationFrame(draw); } };

        function select(key) {
          selectedKey = key;
          const index = view.indexOf(key);
          if (index >= 0) {
            const top = index * ROW;
            if (top < list.scrollTop) list.scrollTop = top;
            else if (top + ROW > list.scrollTop + list.clientHeight) list.scrollTop = top + ROW - list.clientHeight;
          }
          schedule();
        }

        async function act(command, body) {
          const message = $("message");
          message.className = "";
          message.textContent = `${command}…`;
          try {
            const response = await fetch("/api/action", { method: "POST", body: JSON.stringify({ command, ...body }),
              headers: { "Content-Type": "application/json", "X-Rangefs-Token": token } });
            const answer = response.ok ? await response.json() : { ok: false, error: await response.text() };
            message.textContent = answer.ok ? `${command}: ${answer.message || "done"}` : `${command}: ${answer.error}`;
            message.className = answer.ok ? "done" : "failed";
          } catch (error) {
            message.textContent = `${command}: ${error}`;
            message.className = "failed";
          }
        }

        $("actions").addEventListener("click", (event) => {
          const command = event.target.dataset && event.target.dataset.command;
          const f = selectedKey && files.get(selectedKey);
          if (!command || !f) return;
          if (command === "rm" && !confirm(`Remove ${f.name} from the mount and delete its cached data?`)) return;
          act(command, { mount: f.mount, name: f.name });
        });
        $("add").addEventListener("submit", (event) => {
          event.preventDefault();
          act("add", { mount: Number($("addMount").value || 0), url: $("addUrl").value.trim() });
          $("addUrl").value = "";
        });
        for (const id of ["filter", "stateFilter", "sort"]) {
          $(id).addEventListener("input", () => { list.scrollTop = 0; schedule(); });
        }
        list.addEventListener("scroll", () => { if (!drawPending) { drawPending = true; requestAnimationFrame(() => { drawPending = false; drawRows(); }); } });
        window.addEventListener("resize", schedule);
        list.addEventListener("keydown", (event) => {
          const index = view.indexOf(selectedKey), page = Math.max(1, Math.floor(list.clientHeight / ROW) - 1);
          const moves = { ArrowDown: index + 1, ArrowUp: index - 1, PageDown: index + page, PageUp: index - page,
                          Home: 0, End: view.length - 1 };
          if (!(event.key in moves) || view.length === 0) return;
          event.preventDefault();
          select(view[Math.min(view.length - 1, Math.max(0, moves[event.key]))]);
        });
        document.addEventListener("keydown", (event) => {
          if (event.key === "/" && document.activeElement.tagName !== "INPUT") { event.preventDefault(); $("filter").focus(); }
        });

        const events = new EventSource("/api/events");
        events.addEventListener("state", (message) => {
          const event = JSON.parse(message.data);
          if (event.full) files.clear();
          for (const f of event.files) files.set(`${f.mount}/${f.name}`, f);
          mounts = event.mounts;
          const now = performance.now() / 1000;
          mounts.forEach((m, index) => {
            const points = (history.get(index) || []).filter((point) => now - point[0] <= GRAPH);
            points.push([now, m.speed]);
            history.set(index, points);
          });
          $("live").textContent = `live, updated ${new Date().toLocaleTimeString()}`;
          $("live").dataset.events = String(Number($("live").dataset.events || 0) + 1);
          schedule();
        });
        events.onerror = () => { $("live").textContent = "disconnected; reconnecting…"; };
        """#
}
