/** aedes-persistence keeps the types of its in-memory class in `types/`, not beside the file. */
declare module 'aedes-persistence/asyncPersistence.js' {
  export { default } from 'aedes-persistence/types/asyncPersistence.js';
}
