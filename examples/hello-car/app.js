// Hello Car: greets the car it runs in, using its own backend (declared in manifest.network).
//
// The host gives the app its context: the car's device id in the full prefixed form
// (`<brand>:<native_id>`) and a host-signed identity token that the backend verifies against
// the service's JWKS (/.well-known/jwks.json). The app calls its backend with plain fetch(),
// passing the device id URL-encoded as the `device_id` query parameter.

const backend = 'https://api.hello-car.example.com';

/** Shows only the last 4 characters of the device id, as the platform's guidance asks. */
function redactDeviceId(deviceId) {
  const characters = [...deviceId];
  return characters.map((character, i) => (i < characters.length - 4 ? '*' : character)).join('');
}

async function greet(ctx) {
  document.getElementById('car').textContent = redactDeviceId(ctx.activeCarId);
  const url = `${backend}/greeting?device_id=${encodeURIComponent(ctx.activeCarId)}`;
  const response = await fetch(url, { headers: { authorization: `Bearer ${ctx.identityToken}` } });
  const { greeting } = await response.json();
  document.getElementById('greeting').textContent = greeting;
}

// The host calls `svcMiniApp.start(ctx)` once the page has loaded.
globalThis.svcMiniApp = { start: (ctx) => greet(ctx).catch((error) => console.error('hello-car:', error)) };
