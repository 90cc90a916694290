// The temperature playground (ui/logits/playground.py): bars of softmax(logits / T) redrawn in the browser from
// frames the server computed for every step of the slider, so dragging needs no round trip; the release sends T.
// Every number shown comes from the frames (data.probs, data.labels, data.summaries); nothing is computed here.
const SVG = "http://www.w3.org/2000/svg";
const W = 820, H = 240, TOP = 28, BOTTOM = 44, LEFT = 44, RIGHT = 12;

function element(name, attributes, parent) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  if (parent) parent.appendChild(node);
  return node;
}

function build(root, data) {
  root.innerHTML = "";
  const head = document.createElement("div");
  head.className = "tp-head";
  const label = document.createElement("label");
  label.textContent = "Drag T: ";
  const input = document.createElement("input");
  input.type = "range";
  input.min = "0";
  input.max = String(data.temperatures.length - 1);
  input.step = "1";
  input.setAttribute("aria-label", "Temperature T (drag to redraw, release to apply)");
  const readout = document.createElement("span");
  readout.className = "tp-readout";
  label.appendChild(input);
  head.appendChild(label);
  head.appendChild(readout);
  root.appendChild(head);
  const svg = element("svg", { viewBox: `0 0 ${W} ${H}`, class: "tp-chart", role: "img" }, root);
  const plotH = H - TOP - BOTTOM, plotW = W - LEFT - RIGHT;
  for (const tick of [0, 0.25, 0.5, 0.75, 1]) {  // a fixed axis from 0 to 1: bars start at zero and never rescale
    const y = TOP + plotH * (1 - tick);
    element("line", { x1: LEFT, x2: W - RIGHT, y1: y, y2: y, class: "tp-grid" }, svg);
    element("text", { x: LEFT - 6, y: y + 4, class: "tp-tick", "text-anchor": "end" }, svg).textContent = String(tick);
  }
  const n = data.tokens.length, slot = plotW / n, barW = slot * 0.7;
  const bars = [], values = [];
  data.tokens.forEach((token, i) => {
    const x = LEFT + slot * i + (slot - barW) / 2;
    bars.push(element("rect", { x, width: barW, class: "tp-bar", "data-token": token }, svg));
    values.push(element("text", { x: x + barW / 2, class: "tp-value", "text-anchor": "middle" }, svg));
    const name = element("text", { x: x + barW / 2, y: H - BOTTOM + 16, class: "tp-token", "text-anchor": "middle" }, svg);
    name.textContent = token.length > 9 ? token.slice(0, 8) + "…" : token;
    element("title", {}, name).textContent = token;
  });
  element("text", { x: LEFT, y: 16, class: "tp-axis" }, svg).textContent = "probability (softmax of the real logits ÷ T)";
  root.__parts = { input, readout, bars, values, plotH };
  input.addEventListener("input", (event) => {
    const log = window.__temperaturePlayground || (window.__temperaturePlayground = { frameMs: [], drawMs: [] });
    const started = event.timeStamp;  // when the browser created the event: its queueing counts too
    const drawing = performance.now();
    draw(root, Number(input.value));
    root.getBoundingClientRect();  // the layout the new bars need, inside the measured work
    log.drawMs.push(performance.now() - drawing);
    requestAnimationFrame(() => {  // the frame that paints the new bars begins: the input-to-frame time
      log.frameMs.push(performance.now() - started);
    });
  });
  input.addEventListener("pointerdown", () => { root.__dragging = true; });
  input.addEventListener("change", () => {
    root.__dragging = false;
    root.__send(Number(input.value));
  });
}

function draw(root, index) {
  const data = root.__data, { readout, bars, values, plotH } = root.__parts;
  const probs = data.probs[index], labels = data.labels[index];
  bars.forEach((bar, i) => {
    const h = plotH * probs[i];
    bar.setAttribute("y", TOP + plotH - h);
    bar.setAttribute("height", h);
    bar.setAttribute("data-p", String(probs[i]));
    values[i].setAttribute("y", TOP + plotH - h - 4);
    values[i].textContent = labels[i];
  });
  readout.textContent = data.summaries[index];
  root.dataset.index = String(index);
  root.dataset.temperature = String(data.temperatures[index]);
  root.dataset.entropy = String(data.entropy[index]);
  root.dataset.top = String(data.top[index]);
}

export default function (component) {
  const { data, setStateValue, parentElement } = component;
  let root = parentElement.querySelector(".tp-root");
  const shape = JSON.stringify([data.tokens, data.temperatures]);
  if (!root) {
    root = document.createElement("div");
    root.className = "tp-root";
    parentElement.appendChild(root);
  }
  root.__data = data;
  root.__sent = root.__sent || [];  // the frames this slider sent whose runs have not all come back, oldest first
  root.__send = (index) => { root.__sent.push(index); setStateValue("temperature", data.temperatures[index]); };
  if (root.__shape !== shape) {  // a new prompt or model: new bars
    build(root, data);
    root.__shape = shape;
    root.__sent.length = 0;
  }
  if (root.__dragging) return;  // a rerun from elsewhere while the user drags: keep the user's frame
  let nearest = 0;
  data.temperatures.forEach((t, i) => {
    if (Math.abs(t - data.current) < Math.abs(data.temperatures[nearest] - data.current)) nearest = i;
  });
  // A run started by an earlier key press or release comes back after the user moved on: keep the user's value (its
  // own run is on its way). The run of the latest value, or a value set elsewhere (the page's slider, a link), applies.
  const sent = root.__sent;
  if (sent.includes(nearest) && nearest !== sent[sent.length - 1]) return;
  sent.length = 0;
  root.__parts.input.value = String(nearest);
  draw(root, nearest);
}
