// The host page of `svc dev`: the app in a frame on its own origin, answered through
// @svc/sdk/host from the simulated car of the panel, which the dev-server keeps (GET /_svc/state,
// POST /_svc/car) and tells of every change (GET /_svc/events); the app hears each change of the
// car (activecarchange) and of its status (statuschange) at once. Every text from the server, the
// app's folder or the app is shown with textContent, never as HTML.
import { createHost, HostError } from '/_svc/host.js';

const frame = document.getElementById('app');
const form = document.getElementById('car');
const fields = ['deviceId', 'online', 'ignition', 'doorsLocked', 'latitude', 'longitude', 'locale'];

let state;
let host;
/** What the app was started with; a change of any of these starts it again. */
let started = '';
/** The status last told to the app: the same one twice (the change's answer, then its event) is said once. */
let toldStatus = '';

function startApp() {
  host?.close();
  host = undefined;
  started = JSON.stringify([state.appId, state.entry, state.car.locale, state.appUrl]);
  toldStatus = JSON.stringify(state.models.status);
  if (!state.appId || !state.entry) {
    frame.removeAttribute('src');
    return;
  }
  host = createHost({
    frame,
    appUrl: new URL(state.entry, `${state.appUrl}/`),
    appId: state.appId,
    activeCarId: state.car.deviceId,
    locale: state.car.locale,
    identityToken: async () => {
      const response = await fetch('/_svc/identity-token', { method: 'POST', body: '{}' });
      const body = await response.json();
      if (!response.ok) throw new HostError('not_available', body.message);
      return body;
    },
    status: () => state.models.status,
    location: () => state.models.location,
    install: () => state.models.install,
    onCallbackError: (error, method) => console.error(`svc dev: ${method} failed`, error),
  });
}

function show(next) {
  const carChanged = state && state.car.deviceId !== next.car.deviceId;
  state = next;
  if (JSON.stringify([state.appId, state.entry, state.car.locale, state.appUrl]) !== started) startApp();
  else if (carChanged && host) host.setActiveCar(state.car.deviceId);
  if (host && JSON.stringify(state.models.status) !== toldStatus) {
    toldStatus = JSON.stringify(state.models.status);
    // After a change of car the app asks the new car's status itself: only the same car's is news.
    if (!carChanged) host.statusChanged(state.models.status);
  }

  document.getElementById('app-name').textContent = state.appId ?? 'an app with manifest problems';
  for (const name of fields) {
    const input = document.getElementById(name);
    // Not while someone types in it.
    if (document.activeElement === input) continue;
    if (input.type === 'checkbox') input.checked = state.car[name];
    else input.value = String(state.car[name]);
  }
  document.getElementById('brand-warning').textContent = state.brandWarning ?? '';
  const problems = document.getElementById('problems');
  problems.hidden = state.problems.length === 0;
  replaceItems(document.getElementById('problem-list'), state.problems);
  replaceItems(document.getElementById('network'), [
    ...state.network,
    ...state.allowedOrigins.map((o) => `${o} (this session only)`),
  ]);
  document.getElementById('issuer').textContent = state.issuer;
  document.getElementById('jwks').textContent = state.jwksUrl;
  document.getElementById('audience').textContent = state.appId ?? 'your app id';
}

function replaceItems(list, lines) {
  list.replaceChildren(
    ...lines.map((line) => {
      const item = document.createElement('li');
      item.textContent = line;
      return item;
    }),
  );
}

async function change(name, value) {
  const error = form.querySelector(`[data-error-for="${name}"]`);
  const response = await fetch('/_svc/car', { method: 'POST', body: JSON.stringify({ [name]: value }) });
  const body = await response.json();
  if (error) error.textContent = response.ok ? '' : body.message;
  if (!response.ok) return;
  show(body);
  // What was typed, as the car has it now (a locale in its canonical form: de-de → de-DE).
  const input = document.getElementById(name);
  if (input.type !== 'checkbox') input.value = String(body.car[name]);
}

form.addEventListener('submit', (event) => event.preventDefault());
form.addEventListener('change', (event) => {
  const input = event.target;
  if (!fields.includes(input.name)) return;
  const value =
    input.type === 'checkbox'
      ? input.checked
      : input.type === 'number'
        ? Number(input.value)
        : input.value.trim();
  void change(input.name, value);
});

const screenBox = document.getElementById('screen-box');
const screen = document.getElementById('screen');
function fitScreen() {
  const [width, height] = screen.value.split('x').map(Number);
  const area = screenBox.parentElement.getBoundingClientRect();
  const scale = Math.min(1, (area.width - 32) / width, (area.height - 32) / height);
  screenBox.style.width = `${width}px`;
  screenBox.style.height = `${height}px`;
  screenBox.style.transform = `scale(${scale})`;
}
screen.addEventListener('change', fitScreen);
window.addEventListener('resize', fitScreen);
fitScreen();

const violations = document.getElementById('violations');
const events = new EventSource('/_svc/events');
events.addEventListener('state', (event) => show(JSON.parse(event.data)));
events.addEventListener('reload', () => startApp());
events.addEventListener('violation', (event) => {
  const { line } = JSON.parse(event.data);
  violations.querySelector('.none')?.remove();
  if ([...violations.children].some((item) => item.textContent === line)) return;
  const item = document.createElement('li');
  item.textContent = line;
  violations.prepend(item);
});
