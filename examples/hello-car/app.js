// Hello Car: greets the car it runs in, with a greeting from its own backend (manifest.network).
//
// The host serves the SDK's runtime in this app's origin at /_svc/sdk.js, so the app needs no
// bundler. connectHost() gives the active car (its full prefixed device id, `brand_a:…`), its
// status, events when either changes, and identity tokens that the backend verifies against the
// service's JWKS (README.md shows how).
import { connectHost, redactDeviceId } from '/_svc/sdk.js';

const backend = 'https://api.hello-car.example.com';
const car = document.getElementById('car');
const greeting = document.getElementById('greeting');
const statusLine = document.getElementById('status');

async function greet(ctx) {
  const deviceId = ctx.activeCarId;
  // Never the whole id on screen: only its last characters.
  car.textContent = redactDeviceId(deviceId);
  greeting.textContent = 'Asking our backend for a greeting…';
  const { token } = await ctx.identityToken();
  const url = `${backend}/greeting?device_id=${encodeURIComponent(deviceId)}`;
  const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  if (!response.ok) throw new Error(`the backend answered ${response.status}`);
  const body = await response.json();
  // The car may have changed while we asked: a late answer is for a car no longer shown.
  if (ctx.activeCarId !== deviceId) return;
  greeting.textContent = typeof body.greeting === 'string' ? body.greeting : 'Hello!';
}

// The car's state holds what the car reports (keys of its own: ignition, doors_locked, …).
function showStatus(status) {
  const { ignition, doors_locked: locked } = status.state;
  const on = ignition === true;
  statusLine.textContent = `${status.online ? 'Online' : 'Offline'}, ignition ${on ? 'on' : 'off'}, doors ${locked ? 'locked' : 'unlocked'}`;
}

function failed(error) {
  greeting.textContent = 'No greeting just now.';
  console.error('hello-car:', error);
}

try {
  const ctx = await connectHost();
  const show = () => {
    greet(ctx).catch(failed);
    ctx.status().then(showStatus, failed);
  };
  ctx.on('activecarchange', show);
  // The active car's ignition, doors or online changed: `status` is the car's status as it is now
  // (what ctx.status() answers), `changed` what differs (`state.ignition`, `online`, …).
  ctx.on('statuschange', ({ status }) => showStatus(status));
  show();
} catch (error) {
  failed(error);
}
