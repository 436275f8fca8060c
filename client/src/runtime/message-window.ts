/**
 * The parts of a browser window and iframe the bridge uses. Declared here, not taken from the DOM
 * library, so that the repository type-checks as one Node program; a DOM `Window` and
 * `HTMLIFrameElement` have these shapes (client/test/fixtures/bridge-in-dom.ts proves it).
 */

export interface BridgeMessageEvent {
  readonly source: unknown;
  readonly origin: string;
  readonly data: unknown;
}

type MessageListener = (event: BridgeMessageEvent) => void;

export interface MessageWindow {
  readonly parent: MessageWindow;
  readonly location: {
    readonly href: string;
    readonly origin: string;
    /** Chromium and Safari: the origins of the frames that embed this one, nearest first. */
    readonly ancestorOrigins?: ArrayLike<string>;
  };
  postMessage(message: unknown, targetOrigin: string): void;
  addEventListener(type: 'message', listener: MessageListener): void;
  removeEventListener(type: 'message', listener: MessageListener): void;
}

export interface FrameElement {
  readonly ownerDocument: { readonly defaultView: MessageWindow | null; readonly baseURI: string };
  readonly contentWindow: MessageWindow | null;
  src: string;
}
