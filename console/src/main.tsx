import { render } from 'preact';
import { App } from './app.tsx';
import './console.css';

const root = document.getElementById('console');
if (root) {
  root.textContent = '';
  render(<App />, root);
}
