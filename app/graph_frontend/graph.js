// TaLenT's evidence graph: Cytoscape.js in a Streamlit component, the component protocol
// (v1) spoken by hand, so there is no build step. KG text reaches the page only as text
// (textContent, canvas labels): it is never parsed as HTML. The page shows what a node is
// (its name, what it is in the answer, its KG id where that differs), never the component's
// own ids; a double-click or the panel's button asks the page to expand a node.
"use strict";

const send = (type, extra) => window.parent.postMessage(
  Object.assign({isStreamlitMessage: true, type: type}, extra || {}), "*");

let cy = null;
let args = {};
let drawn = "";  // the elements last drawn, as JSON: a rerun with the same ones keeps the view
const panel = document.getElementById("panel");

function text(tag, cls, value) {
  const el = document.createElement(tag);
  if (cls) el.className = cls;
  el.textContent = value;
  return el;
}

function row(key, value) {
  const el = text("div", "row", "");
  el.append(text("span", "key", key), text("span", "value", value));
  return el;
}

function expand(node) {
  if (!node.data("expandable")) return;
  send("streamlit:setComponentValue",
       {value: {action: "expand", node: node.id(), timestamp: Date.now()}, dataType: "json"});
}

function showPanel(el) {
  const roles = args.roles || {}, groups = args.groups || {};
  panel.replaceChildren();
  if (el.isNode()) {
    const d = el.data();
    panel.append(text("div", "title", d.name));
    panel.append(row("role", (roles[d.role] || {}).text || d.role));
    if (d.kg_id && d.kg_id !== d.name) panel.append(row("KG id", d.kg_id));
    if (d.expandable) {
      const actions = text("div", "actions", "");
      const button = text("button", "", "Expand neighbours");
      button.id = "expand";
      button.type = "button";
      button.onclick = () => expand(el);
      actions.append(button);
      panel.append(actions);
    }
  } else {
    const d = el.data();
    panel.append(text("div", "title", d.rel));
    panel.append(row("from", el.source().data("name")));
    panel.append(row("to", el.target().data("name")));
    panel.append(row("edge", (groups[d.group] || {}).text || d.group));
  }
  panel.hidden = false;
}

function styles(a) {
  const font = a.font || 13, size = Math.max(0.9 * font, 6);
  const out = [
    {selector: "node", style: {
      "label": "data(name)", "width": size, "height": size, "background-color": "#9e9e9e",
      "font-size": font, "min-zoomed-font-size": 0, "color": "#262730",
      "text-valign": "bottom", "text-margin-y": 0.15 * font,
      "text-wrap": "ellipsis", "text-max-width": a.label_width || 200,
      "text-background-color": "#ffffff", "text-background-opacity": 0.8,
      "text-background-padding": 0.1 * font}},
    {selector: "edge", style: {
      "label": "data(caption)", "width": Math.max(0.12 * font, 1), "curve-style": "bezier",
      "line-color": "#b0b0b0", "target-arrow-color": "#b0b0b0",
      "target-arrow-shape": "triangle", "arrow-scale": 0.8,
      "font-size": 0.75 * font, "min-zoomed-font-size": 8, "color": "#555",
      "text-rotation": "autorotate", "text-background-color": "#ffffff",
      "text-background-opacity": 0.85, "text-background-padding": 0.05 * font}},
    {selector: "node:selected", style: {"border-width": 0.25 * font, "border-color": "#262730"}},
    {selector: "edge:selected", style: {"width": Math.max(0.3 * font, 2)}},
  ];
  // roles and groups are the page's constants, never KG text
  for (const [role, r] of Object.entries(a.roles || {})) {
    out.push({selector: `node[role = "${role}"]`, style: {"background-color": r.colour}});
  }
  for (const [group, g] of Object.entries(a.groups || {})) {
    out.push({selector: `edge[group = "${group}"]`,
              style: {"line-color": g.colour, "target-arrow-color": g.colour}});
  }
  return out;
}

function draw(a) {
  args = a;
  const els = a.elements || {nodes: [], edges: []};
  const key = JSON.stringify([els, a.font, a.roles, a.groups]);
  if (key === drawn) return;
  drawn = key;
  if (!cy) {
    cy = cytoscape({container: document.getElementById("cy"), elements: els,
                    style: styles(a), layout: {name: "preset", fit: true, padding: 30},
                    boxSelectionEnabled: false,
                    selectionType: "single"});
    cy.on("tap", "node, edge", (e) => showPanel(e.target));
    cy.on("tap", (e) => { if (e.target === cy) { panel.hidden = true; cy.elements().unselect(); } });
    cy.on("dbltap", "node", (e) => expand(e.target));
    return;
  }
  // a later draw (a click's expansion): keep the elements drawn, add the new ones, move
  // every node to its new place, and fit
  cy.style(styles(a));
  const keep = new Set([...els.nodes, ...els.edges].map((e) => e.data.id));
  cy.elements().filter((e) => !keep.has(e.id())).remove();
  cy.batch(() => {
    for (const n of els.nodes) {
      const have = cy.getElementById(n.data.id);
      if (have.length) { have.data(n.data); have.position(n.position); } else cy.add(n);
    }
    for (const e of els.edges) {
      const have = cy.getElementById(e.data.id);
      if (have.length) have.data(e.data); else cy.add(e);
    }
  });
  cy.fit(undefined, 30);
  const open = cy.$(":selected");
  if (open.length) showPanel(open[0]); else panel.hidden = true;
}

document.getElementById("fit").onclick = () => cy && cy.fit(undefined, 30);
// the frame takes its height after the first draw (and its width from the page): Cytoscape
// keeps the size it measured, so a click would land off the node drawn under it
window.addEventListener("resize", () => { if (cy) { cy.resize(); cy.fit(undefined, 30); } });
window.addEventListener("message", (event) => {
  if (event.source !== window.parent) return;
  const data = event.data || {};
  if (data.type !== "streamlit:render") return;
  send("streamlit:setFrameHeight", {height: (data.args || {}).height || 680});
  draw(data.args || {});
});
send("streamlit:componentReady", {apiVersion: 1});
