// The warren web view: plain JavaScript, no framework and no build step. The server
// folds the run's events into one row per agent; this page only draws rows as they
// come over the event stream (GET /api/events) and reads transcripts from
// /api/agents/ID/transcript. Text from the run is always set as text, never as HTML.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  // The shortest timeline row that gets its agent's name beside it.
  const TIMELINE_NAMED_ROW_PX = 10;
  const FINAL = new Set(['ok', 'error', 'cancelled', 'timed_out', 'max_turns',
    'budget_exceeded', 'truncated', 'refused', 'interrupted']);

  // The token came in the address; the cookie set with the page keeps it from now on.
  const query = new URLSearchParams(location.search);
  if (query.has('token')) {
    query.delete('token');
    const rest = query.toString();
    history.replaceState(null, '', location.pathname + (rest ? '?' + rest : '') + location.hash);
  }
  const runParam = new URLSearchParams(location.hash.slice(1)).get('run');
  const api = (path) => runParam
    ? path + (path.includes('?') ? '&' : '?') + 'run=' + encodeURIComponent(runParam)
    : path;

  const agents = new Map();   // id -> row
  const kids = new Map();     // parent id -> child ids, in order of appearance
  const items = new Map();    // id -> tree item element
  const dirty = new Set();
  let run = null;
  let clockOffset = 0;        // server clock minus ours
  let orderDirty = false;
  let order = [];
  let position = new Map();   // id -> its index in `order`
  // Past VIRTUAL_AT agents only the rows in view (and OVERSCAN either side) are in
  // the page, each ROW_PX high inside a spacer as tall as the whole tree.
  const VIRTUAL_AT = 500;
  const OVERSCAN = 20;
  let virtual = false;
  let rowPx = 0;
  let windowSpan = '';
  const spacer = document.createElement('div');
  spacer.className = 'spacer';
  let selected = null;
  let scheduled = false;
  let timelineAt = 0;
  // For measurements (the bench reads them): the newest event drawn, when, and how
  // long drawing took.
  const stats = window.warrenStats = {
    renders: 0, lastRenderMs: 0, maxRenderMs: 0, totalRenderMs: 0, firstRenderMs: 0,
    newestEventMs: 0, shownAtMs: 0, agents: 0,
  };
  let pendingEventMs = 0;

  const now = () => Date.now() + clockOffset;
  // A record's time of day (UTC); one outside Date's range reads as invalid rather
  // than throwing, which would leave the rest of a transcript unshown.
  const clock = (ms) => {
    const date = new Date(ms);
    return Number.isNaN(date.getTime()) ? 'invalid time' : date.toISOString().slice(11, 23);
  };
  const fmt = new Intl.NumberFormat('en');
  const secs = (ms) => (ms / 1000).toFixed(1) + ' s';
  const usd = (v) => '$' + (v || 0).toFixed(4);

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function status(text) { $('status').textContent = text; }

  // --- the stream ---------------------------------------------------------------

  function connect() {
    const events = new EventSource(api('/api/events'));
    events.addEventListener('snapshot', (e) => reset(JSON.parse(e.data)));
    events.addEventListener('agent', (e) => upsert(JSON.parse(e.data)));
    events.addEventListener('run', (e) => setRun(JSON.parse(e.data)));
    events.addEventListener('event', (e) => onEvent(JSON.parse(e.data)));
    events.addEventListener('lagged', () => status('fell behind; reloading the snapshot…'));
    events.onopen = () => { if ($('status').dataset.lost) { status(''); delete $('status').dataset.lost; } };
    events.onerror = () => {
      // A finished run's stream ends with it: nothing more will come, so nothing is lost.
      if (run && run.finished) {
        events.close();
        status('');
      } else if (events.readyState === EventSource.CONNECTING) {
        $('status').dataset.lost = '1';
        status('connection lost; retrying…');
      } else if (!run) {
        showRuns();
      }
    };
  }

  function reset(snapshot) {
    agents.clear(); kids.clear(); items.clear();
    $('tree').replaceChildren();
    spacer.replaceChildren();
    order = [];
    windowSpan = '';
    virtual = false;
    $('tree').classList.remove('virtual');
    const started = performance.now();
    for (const row of snapshot.agents) upsert(row);
    setRun(snapshot.run);
    render();
    stats.firstRenderMs = performance.now() - started;
    if (selected && agents.has(selected)) select(selected, false);
  }

  function setRun(summary) {
    run = summary;
    clockOffset = summary.now_ms - Date.now();
    schedule();
  }

  function upsert(row) {
    const known = agents.get(row.id);
    if (!known) {
      const parent = row.parent && agents.has(row.parent) ? row.parent : null;
      if (!kids.has(parent)) kids.set(parent, []);
      kids.get(parent).push(row.id);
      orderDirty = true;
    }
    agents.set(row.id, row);
    dirty.add(row.id);
    schedule();
  }

  function onEvent(record) {
    pendingEventMs = Math.max(pendingEventMs, record.ts_ms || 0);
    if (record.agent !== selected) return;
    if (record.type === 'text_delta') {
      $('streaming').textContent = ($('streaming').textContent + record.text).slice(-2000);
    } else if (record.type === 'turn_started' || record.type === 'agent_finished') {
      $('streaming').textContent = '';
    }
    if (record.type !== 'text_delta') refreshTranscript();
    schedule();
  }

  function schedule() {
    if (!scheduled) { scheduled = true; requestAnimationFrame(render); }
  }

  // --- drawing ------------------------------------------------------------------

  function render() {
    scheduled = false;
    const started = performance.now();
    if (orderDirty) placeItems();
    if (virtual) placeWindow();
    // A row out of view is drawn when it comes into view.
    for (const id of dirty) if (!virtual || (items.get(id) && items.get(id).isConnected)) drawItem(id);
    if (selected && dirty.has(selected)) drawFacts();
    dirty.clear();
    drawRun();
    drawRequests();
    if (performance.now() - timelineAt > 500) drawTimeline();
    const took = performance.now() - started;
    stats.renders += 1;
    stats.lastRenderMs = took;
    stats.maxRenderMs = Math.max(stats.maxRenderMs, took);
    stats.totalRenderMs += took;
    stats.agents = agents.size;
    if (pendingEventMs > stats.newestEventMs) {
      stats.newestEventMs = pendingEventMs;
      stats.shownAtMs = Date.now();
    }
  }

  function treeOrder() {
    const out = [];
    const walk = (id) => {
      out.push(id);
      for (const child of kids.get(id) || []) walk(child);
    };
    for (const root of kids.get(null) || []) walk(root);
    return out;
  }

  function placeItems() {
    orderDirty = false;
    order = treeOrder();
    position = new Map(order.map((id, at) => [id, at]));
    if (order.length > VIRTUAL_AT) {
      if (!virtual) startVirtual();
      spacer.style.height = (order.length * rowPx) + 'px';
      windowSpan = '';
      return;
    }
    const fragment = document.createDocumentFragment();
    for (const id of order) {
      let item = items.get(id);
      if (!item) {
        item = makeItem(id);
        items.set(id, item);
        dirty.add(id);
      }
      fragment.appendChild(item);
    }
    $('tree').appendChild(fragment);
    if (!$('tree').querySelector('[tabindex="0"]') && order.length) {
      items.get(order[0]).tabIndex = 0;
    }
  }

  // The tree becomes a spacer as tall as every row, holding the rows in view.
  function startVirtual() {
    virtual = true;
    const tree = $('tree');
    tree.replaceChildren(spacer);
    tree.classList.add('virtual');
    const probe = itemFor(order[0]);
    spacer.appendChild(probe);
    rowPx = probe.offsetHeight || 40;
    probe.remove();
    tree.addEventListener('scroll', schedule);
  }

  // Puts in the page the rows in view (and OVERSCAN either side), and only those.
  function placeWindow() {
    const tree = $('tree');
    const first = Math.max(0, Math.floor(tree.scrollTop / rowPx) - OVERSCAN);
    const last = Math.min(order.length, Math.ceil((tree.scrollTop + tree.clientHeight) / rowPx) + OVERSCAN);
    const span = first + ':' + last + ':' + order.length;
    if (span === windowSpan) return;
    windowSpan = span;
    const shown = new Set(order.slice(first, last));
    for (const child of [...spacer.children]) if (!shown.has(child.dataset.id)) child.remove();
    for (let at = first; at < last; at++) {
      const item = itemFor(order[at]);
      item.style.top = (at * rowPx) + 'px';
      if (!item.isConnected) { spacer.appendChild(item); drawItem(order[at]); }
    }
    if (!spacer.querySelector('[tabindex="0"]') && spacer.firstChild) spacer.firstChild.tabIndex = 0;
  }

  function itemFor(id) {
    let item = items.get(id);
    if (!item) {
      item = makeItem(id);
      items.set(id, item);
      drawItem(id);
    }
    return item;
  }

  // Brings agent `id`'s row into the page (scrolling the tree to it if it is not in
  // view) and returns it.
  function reveal(id) {
    if (virtual && position.has(id)) {
      const tree = $('tree');
      const top = position.get(id) * rowPx;
      if (top < tree.scrollTop || top + rowPx > tree.scrollTop + tree.clientHeight) {
        tree.scrollTop = Math.max(0, top - tree.clientHeight / 2);
      }
      placeWindow();
    }
    return items.get(id);
  }

  function makeItem(id) {
    const item = el('div', 'agent');
    item.setAttribute('role', 'treeitem');
    item.tabIndex = -1;
    item.dataset.id = id;
    item.setAttribute('aria-selected', 'false');
    for (const part of ['mark', 'name', 'id', 'state', 'usage']) item.appendChild(el('span', part));
    item.addEventListener('click', () => select(id, true));
    return item;
  }

  function doing(row) {
    const a = row.activity || {};
    if (a.kind === 'tool') return '⚙ ' + a.tool;
    if (a.kind === 'done' || a.kind === 'queued') return '';
    return a.kind || '';
  }

  function usageText(row) {
    const parts = [row.turns + (row.max_turns ? '/' + row.max_turns : '') + ' turns',
      fmt.format(row.input_tokens + row.output_tokens) + ' tok',
      usd(row.cost_usd) + (row.max_cost_usd != null ? ' of ' + usd(row.max_cost_usd) : '')];
    const time = elapsed(row);
    if (time != null) parts.push(secs(time) + (row.timeout_s ? ' of ' + row.timeout_s + ' s' : ''));
    if (!row.finished_ms) parts.push('idle ' + secs(Math.max(0, now() - row.last_ms)));
    if (row.denials) parts.push(row.denials + ' denied');
    return parts.join(' · ');
  }

  function elapsed(row) {
    if (row.duration_ms != null) return row.duration_ms;
    if (row.started_ms) return Math.max(0, now() - row.started_ms);
    return null;
  }

  function drawItem(id) {
    const row = agents.get(id);
    const item = items.get(id);
    if (!row || !item) return;
    const depth = row.depth || 0;
    item.setAttribute('aria-level', String(depth + 1));
    const siblings = kids.get(row.parent && agents.has(row.parent) ? row.parent : null) || [];
    item.setAttribute('aria-setsize', String(siblings.length));
    item.setAttribute('aria-posinset', String(siblings.indexOf(id) + 1));
    item.style.paddingLeft = (0.4 + depth * 1.2) + 'em';
    item.dataset.state = row.state;
    const title = row.profile + (row.description ? ' (' + row.description + ')' : '');
    const [mark, name, idEl, state, usage] = item.children;
    mark.textContent = row.state === 'ok' ? '✓' : FINAL.has(row.state) ? '✗' : row.state === 'queued' ? '…' : '●';
    name.textContent = title;
    idEl.textContent = row.id;
    state.textContent = row.state + (doing(row) ? ' · ' + doing(row) : '');
    usage.textContent = usageText(row);
    item.setAttribute('aria-label', `${title} ${row.id}: ${row.state}${doing(row) ? ', ' + doing(row) : ''}`);
  }

  function drawRun() {
    if (!run) return;
    $('run-title').textContent = run.id + ' · ' + run.state + (run.live ? '' : ' (journal)');
    $('run-task').textContent = run.task;
    $('agent-count').textContent = '(' + run.agents + ')';
    const totals = [
      ['state', run.state + (run.finished ? '' : run.live ? ' (live)' : ' (no end recorded)')],
      ['agents', Object.entries(run.states).map(([s, n]) => n + ' ' + s).join(', ')],
      ['tokens', fmt.format(run.tokens)],
      ['cost', usd(run.cost_usd) + (run.budget_usd != null ? ' of ' + usd(run.budget_usd) + ' budget' : '')],
      ['time', run.started_ms ? secs((run.finished ? run.last_ms : now()) - run.started_ms) : '-'],
    ];
    if (run.max_concurrent) totals.push(['at once', 'at most ' + run.max_concurrent + ' sub-agents']);
    const dl = $('totals');
    dl.replaceChildren();
    for (const [k, v] of totals) { dl.appendChild(el('dt', '', k)); dl.appendChild(el('dd', 'total-' + k.replace(' ', '-'), v)); }
    const finished = run.finished || !run.live;
    $('commands').hidden = !finished;
    if (finished) {
      $('cmd-show').textContent = run.commands.show;
      // Only a run whose end was never recorded can be resumed.
      $('resume-command').hidden = !run.commands.resume;
      $('cmd-resume').textContent = run.commands.resume || '';
    }
    // A run that ended takes no message.
    if (run.finished) $('message').hidden = true;
    document.body.dataset.runState = run.state;
  }

  // --- selection, keyboard, transcript ------------------------------------------

  function select(id, focus) {
    if (selected && items.get(selected)) items.get(selected).setAttribute('aria-selected', 'false');
    selected = id;
    const item = reveal(id);
    if (!item) return;
    item.setAttribute('aria-selected', 'true');
    moveFocus(item, focus);
    $('streaming').textContent = '';
    drawFacts();
    transcriptAgain = false;
    if (transcriptTimer) transcriptAgain = true; else refreshTranscript(true);
  }

  function moveFocus(item, focus) {
    for (const other of $('tree').querySelectorAll('[tabindex="0"]')) other.tabIndex = -1;
    for (const other of items.values()) if (!other.isConnected) other.tabIndex = -1;
    item.tabIndex = 0;
    if (focus) item.focus();
  }

  $('tree').addEventListener('keydown', (e) => {
    const current = e.target.closest('[role="treeitem"]');
    if (!current) return;
    const at = position.get(current.dataset.id);
    const row = agents.get(current.dataset.id);
    let next = null;
    switch (e.key) {
      case 'ArrowDown': next = order[at + 1]; break;
      case 'ArrowUp': next = order[at - 1]; break;
      case 'Home': next = order[0]; break;
      case 'End': next = order[order.length - 1]; break;
      case 'ArrowLeft': next = row && row.parent; break;
      case 'ArrowRight': next = (kids.get(current.dataset.id) || [])[0]; break;
      case 'Enter': case ' ': select(current.dataset.id, true); e.preventDefault(); return;
      default: return;
    }
    e.preventDefault();
    const target = next && reveal(next);
    if (target) moveFocus(target, true);
  });

  function drawFacts() {
    const row = agents.get(selected);
    if (!row) return;
    $('detail-title').textContent = 'Agent ' + row.id + ' · ' + row.profile + (row.description ? ' (' + row.description + ')' : '');
    const facts = [
      ['path', row.path], ['state', row.state + (doing(row) ? ' · ' + doing(row) : '')],
      ['model', row.model || '-'], ['usage', usageText(row)],
      ['tools', row.tool_calls + ' calls · fuel ' + fmt.format(row.fuel_used) + ' · ' + fmt.format(row.output_bytes) + ' bytes returned'],
      ['task', row.task],
    ];
    if (row.error) facts.push(['error', row.error]);
    const dl = $('facts');
    dl.replaceChildren();
    for (const [k, v] of facts) { dl.appendChild(el('dt', '', k)); dl.appendChild(el('dd', 'fact-' + k, v)); }
    $('cancel').hidden = !(run && run.live) || FINAL.has(row.state);
    // A running agent takes any message; one that finished ok, a follow-up.
    $('message').hidden = !run || run.finished || (FINAL.has(row.state) && row.state !== 'ok');
  }

  // One transcript load at a time; a change seen meanwhile loads it again after.
  let transcriptTimer = null;
  let transcriptAgain = false;
  function refreshTranscript(immediate) {
    if (transcriptTimer) { transcriptAgain = true; return; }
    transcriptTimer = setTimeout(loadTranscript, immediate ? 0 : 250);
  }

  async function loadTranscript() {
    try {
      await drawTranscript(selected);
    } finally {
      transcriptTimer = null;
      if (transcriptAgain) { transcriptAgain = false; refreshTranscript(false); }
    }
  }

  async function drawTranscript(id) {
    if (!id) return;
    const response = await fetch(api('/api/agents/' + encodeURIComponent(id) + '/transcript'));
    const box = $('transcript');
    if (id !== selected) return;
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      box.replaceChildren(el('p', 'note', body.error || 'no transcript yet'));
      return;
    }
    const body = await response.json();
    if (id !== selected) return;
    const atBottom = box.scrollTop + box.clientHeight >= box.scrollHeight - 8;
    box.replaceChildren(...body.records.map(entry));
    if (atBottom) box.scrollTop = box.scrollHeight;
  }

  function entry(line) {
    const r = line;
    const article = el('article', 'entry ' + r.type);
    const head = el('h3');
    const body = [];
    switch (r.type) {
      case 'agent_queued': head.textContent = 'queued by ' + (r.parent || 'the caller'); break;
      case 'agent_started': head.textContent = 'started'; break;
      case 'agent_spec':
        head.textContent = `given (model ${r.model || '-'}, max_turns ${r.max_turns}, timeout ${r.timeout_s} s, tools: ${r.tools.join(', ') || 'none'})`;
        body.push(el('pre', '', r.message));
        break;
      case 'model_response':
        head.textContent = `turn ${r.turn} (${r.finish}; ${fmt.format(r.input_tokens)} + ${fmt.format(r.output_tokens)} tokens, ${usd(r.cost_usd)})`;
        if (r.reasoning) body.push(el('pre', 'reasoning', r.reasoning));
        if (r.text) body.push(el('pre', '', r.text));
        break;
      case 'tool_started':
        head.textContent = '→ ' + r.tool;
        body.push(el('pre', 'arguments', r.arguments));
        // The code-running tools: the code itself, as the model wrote it.
        if (r.tool === 'run_python' || r.tool === 'run_js') {
          try { body.push(el('pre', 'code', JSON.parse(r.arguments).code)); } catch (e) { /* shown above */ }
        }
        break;
      case 'tool_finished': {
        // The sandbox's figures; no fuel for a call no guest ran (the spawn tools).
        head.textContent = '← ' + r.outcome + ' ';
        const figures = el('span', 'figures');
        figures.append(el('span', 'time', r.duration_ms + ' ms'), ' · ',
          el('span', 'fuel', 'fuel ' + (r.fuel_used != null ? fmt.format(r.fuel_used) : '—')), ' · ',
          el('span', 'bytes', fmt.format(r.output_bytes || 0) + ' bytes'));
        if (r.memory_peak_bytes != null) {
          figures.append(' · ', el('span', 'memory', 'memory peak ' + fmt.format(Math.round(r.memory_peak_bytes / 1024)) + ' KiB'));
        }
        head.append(figures);
        article.dataset.outcome = r.outcome;
        if (r.denied) article.classList.add('denied');
        else if (r.outcome !== 'ok') article.classList.add('failed');
        body.push(el('pre', '', r.content));
        break;
      }
      case 'message_sent':
        head.textContent = `message #${r.seq} from ${r.from} (${r.mode})`;
        body.push(el('pre', 'message', r.text));
        break;
      case 'message_delivered':
        head.textContent = `message #${r.seq} read in turn ${r.turn}`;
        break;
      case 'input_requested':
        head.textContent = r.kind === 'approval'
          ? `asked a person to approve ${r.tool} (${r.id})`
          : `asked a person (${r.id}): ${r.question || ''}`;
        break;
      case 'input_answered':
        head.textContent = `${r.verdict} by ${r.by} (${r.request})` + (r.text ? ': ' + r.text : '');
        break;
      case 'agent_finished':
        head.textContent = 'finished ' + r.state + (r.error ? ': ' + r.error : '');
        article.dataset.state = r.state;
        break;
      default: head.textContent = r.type;
    }
    const time = el('time', '', clock(r.ts_ms));
    head.prepend(time, ' ');
    article.append(head, ...body);
    return article;
  }

  $('cancel').addEventListener('click', async () => {
    const row = agents.get(selected);
    if (!row) return;
    const below = countBelow(row.id);
    const ask = `Cancel agent ${row.id} (${row.profile})` + (below ? ` and the ${below} agent(s) under it?` : '?');
    if (!window.confirm(ask)) return;
    const response = await fetch(api('/api/agents/' + encodeURIComponent(row.id) + '/cancel'), { method: 'POST' });
    const body = await response.json().catch(() => ({}));
    status(response.ok ? `cancelled ${body.cancelled} and its subtree` : (body.error || 'cancel failed'));
  });

  $('message').addEventListener('submit', async (event) => {
    event.preventDefault();
    const row = agents.get(selected);
    if (!row) return;
    const message = $('message-text').value;
    const mode = $('message-mode').value;
    const response = await fetch(api('/api/agents/' + encodeURIComponent(row.id) + '/message'), {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ message, mode }),
    });
    const body = await response.json().catch(() => ({}));
    const receipt = response.ok ? body.text : (body.error || 'the message was not sent');
    $('message-receipt').textContent = receipt;
    status(receipt);
    if (response.ok) $('message-text').value = '';
  });

  // --- requests for a person ----------------------------------------------------

  // Each waiting request (an agent's row carries it) as a card with its answers;
  // a card the person is typing in is left as it is.
  function drawRequests() {
    const waiting = [...agents.values()].filter((row) => row.request).map((row) => row.request);
    const list = $('request-list');
    const ids = new Set(waiting.map((r) => r.id));
    for (const card of [...list.children]) if (!ids.has(card.dataset.id)) card.remove();
    for (const request of waiting) {
      if (list.querySelector(`[data-id="${CSS.escape(request.id)}"]`)) continue;
      list.appendChild(requestCard(request));
    }
    $('requests').hidden = waiting.length === 0 || !run || run.finished;
  }

  function requestCard(request) {
    const card = el('article', 'request');
    card.dataset.id = request.id;
    const approval = request.kind === 'approval';
    const head = el('h3', '', approval
      ? `${request.path} wants to call ${request.tool}`
      : `${request.path} asks`);
    card.append(head);
    if (approval) {
      card.append(el('pre', 'arguments', request.arguments));
      if (request.touches && request.touches.length) {
        const ul = el('ul', 'touches');
        for (const t of request.touches) ul.appendChild(el('li', '', t));
        card.append(el('p', '', 'It could touch:'), ul);
      }
    } else {
      card.append(el('p', 'question', request.question || ''));
    }
    const left = Math.max(0, Math.ceil((request.deadline_ms - now()) / 1000));
    card.append(el('p', 'deadline', `${request.id} · ${approval ? 'denied' : 'unanswered'} in ${left} s if nobody answers`));
    const text = el(approval ? 'input' : 'textarea', 'request-text');
    text.setAttribute('aria-label', approval ? 'Reason, if you deny' : 'Your answer');
    text.placeholder = approval ? 'reason (for a denial)' : 'your answer';
    card.append(text);
    const out = el('output', 'request-receipt');
    const answer = async (verdict) => {
      const response = await fetch(api('/api/requests/' + encodeURIComponent(request.id) + '/answer'), {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ verdict, text: text.value }),
      });
      const body = await response.json().catch(() => ({}));
      out.textContent = response.ok ? body.text : (body.error || 'not answered');
      status(out.textContent);
    };
    const buttons = approval
      ? [['Approve', 'approve'], ['Approve this tool for the run', 'approve_tool'], ['Deny', 'deny']]
      : [['Answer', 'answer']];
    for (const [label, verdict] of buttons) {
      const button = el('button', 'answer-' + verdict, label);
      button.type = 'button';
      button.addEventListener('click', () => answer(verdict));
      card.append(button);
    }
    card.append(out);
    return card;
  }

  function countBelow(id) {
    let n = 0;
    for (const child of kids.get(id) || []) n += 1 + countBelow(child);
    return n;
  }

  for (const button of document.querySelectorAll('[data-copy]')) {
    button.addEventListener('click', async () => {
      const text = $(button.dataset.copy).textContent;
      try { await navigator.clipboard.writeText(text); status('copied: ' + text); } catch (e) {
        const range = document.createRange();
        range.selectNodeContents($(button.dataset.copy));
        getSelection().removeAllRanges();
        getSelection().addRange(range);
        status('selected: ' + text);
      }
    });
  }

  // --- the timeline -------------------------------------------------------------

  function drawTimeline() {
    timelineAt = performance.now();
    const canvas = $('timeline');
    if (!run || !order.length) return;
    const width = canvas.clientWidth || 800;
    const rowHeight = Math.max(1, Math.min(12, Math.floor(600 / order.length)));
    const height = rowHeight * order.length;
    const ratio = window.devicePixelRatio || 1;
    canvas.width = width * ratio;
    canvas.height = height * ratio;
    canvas.style.height = height + 'px';
    const g = canvas.getContext('2d');
    g.scale(ratio, ratio);
    const start = run.started_ms || now();
    const end = Math.max(start + 1, run.finished ? run.last_ms : now());
    const x = (t) => ((t - start) / (end - start)) * width;
    const color = (name) => getComputedStyle(document.documentElement).getPropertyValue('--' + name).trim();
    const colors = { queued: color('queued'), running: color('running'), waiting: color('waiting'), failed: color('failed') };
    let peakQueued = 0;
    order.forEach((id, i) => {
      const a = agents.get(id);
      const y = i * rowHeight;
      const h = Math.max(1, rowHeight - (rowHeight > 3 ? 1 : 0));
      const queued = a.queued_ms || start;
      const began = a.started_ms || (a.finished_ms || end);
      const ended = a.finished_ms || end;
      if (!a.started_ms && !a.finished_ms) peakQueued += 1;
      g.fillStyle = colors.queued;
      g.fillRect(x(queued), y, Math.max(1, x(began) - x(queued)), h);
      if (a.started_ms) {
        g.fillStyle = FINAL.has(a.state) && a.state !== 'ok' ? colors.failed : colors.running;
        g.fillRect(x(began), y, Math.max(1, x(ended) - x(began)), h);
      }
      g.fillStyle = colors.waiting;
      for (const [from, to] of a.waits || []) g.fillRect(x(from), y, Math.max(1, x(to || ended) - x(from)), h);
    });
    canvas.setAttribute('aria-label', `Timeline of ${order.length} agents over ${secs(end - start)}; ${peakQueued} waiting for a slot now`);
    drawTimelineNames(rowHeight);
    drawTimelineAxis(width, end - start);
  }

  // Each bar's agent, beside it, while the rows are tall enough to read.
  function drawTimelineNames(rowHeight) {
    const names = $('timeline-names');
    if (rowHeight < TIMELINE_NAMED_ROW_PX) {
      names.replaceChildren(el('div', 'note', order.length + ' agents, in tree order: select one in the tree to see it'));
      return;
    }
    names.replaceChildren(...order.map((id) => {
      const a = agents.get(id);
      const name = el('div', '', a.profile + (a.description ? ' (' + a.description + ')' : '') + ' ' + id);
      name.style.height = name.style.lineHeight = rowHeight + 'px';
      return name;
    }));
  }

  // Seconds from the run's start, at a round step that gives at most eight ticks.
  function drawTimelineAxis(width, spanMs) {
    const steps = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30,
      60, 120, 300, 600, 1800, 3600, 7200];
    const seconds = Math.max(spanMs, 1) / 1000;
    const step = steps.find((s) => seconds / s <= 8) || Math.ceil(seconds / 8);
    const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
    const ticks = [];
    for (let i = 0; i * step <= seconds + 1e-9; i++) {
      const t = i * step;
      const tick = el('span', '', t.toFixed(decimals) + ' s');
      tick.style.left = (t / seconds) * width + 'px';
      ticks.push(tick);
    }
    $('timeline-axis').replaceChildren(...ticks);
  }

  // Running agents' clocks and idle times move without events.
  setInterval(() => {
    for (const [id, row] of agents) if (!row.finished_ms) dirty.add(id);
    if (selected) dirty.add(selected);
    schedule();
    timelineAt = 0;
  }, 1000);

  // --- the runs list (warren view without a run) --------------------------------

  async function showRuns() {
    const response = await fetch('/api/runs');
    if (!response.ok) return;
    const body = await response.json();
    $('runs').hidden = false;
    $('run-title').textContent = 'runs in ' + body.dir;
    const tbody = $('runs-table').tBodies[0];
    tbody.replaceChildren();
    for (const r of body.runs) {
      const tr = el('tr');
      const link = el('a', '', r.run_id);
      link.href = '#run=' + encodeURIComponent(r.run_id);
      const first = el('td');
      first.appendChild(link);
      tr.append(first, el('td', '', r.started_utc),
        el('td', '', r.state + (r.finished ? '' : ' (no end)')), el('td', '', String(r.agents ?? '?')),
        el('td', '', r.tokens == null ? '?' : fmt.format(r.tokens)), el('td', '', usd(r.cost_usd)), el('td', '', r.task));
      tbody.appendChild(tr);
    }
  }

  window.addEventListener('hashchange', () => location.reload());
  connect();
})();
