// The agent picker: the agents the person can talk to (GET /agents). Choosing one is the app's to
// carry out (app.js: the socket follows it, the log and the canvas show its chat).

export class AgentPicker {
  /**
   * `url`: the API's agents path; `place`: the agent shown (read only); `defaultAgent`: its slug;
   * `onChoose(agentId)` when the person (or a fallback) picks another agent;
   * `onDetails(agent)` with the name and avatar of the agent shown, once the list has them.
   */
  constructor({ api, url, select, place, defaultAgent, onChoose, onDetails }) {
    this.api = api;
    this.url = url;
    this.select = select;
    this.place = place;
    this.defaultAgent = defaultAgent;
    this.onChoose = onChoose;
    this.onDetails = onDetails;
    this.agents = [];
    select.addEventListener("change", () => onChoose(select.value));
  }

  find(agentId) {
    return this.agents.find((agent) => agent.id === agentId) ?? null;
  }

  /** An agent the server switched to that the list does not hold yet. */
  remember(agent) {
    if (!this.find(agent.id)) this.agents.push({ ...agent });
  }

  /** The picker shows `agentId` (after a switch, or to undo a choice that did not happen). */
  show(agentId) {
    this.select.value = agentId;
  }

  async load() {
    try {
      const { status, data } = await this.api.get(this.url);
      if (status !== 200 || !Array.isArray(data)) return;
      this.agents = data;
    } catch {
      return;
    }
    this.select.replaceChildren(
      ...this.agents.map((agent) => {
        const option = document.createElement("option");
        option.value = agent.id;
        option.textContent = agent.avatar ? `${agent.avatar}  ${agent.name}` : agent.name;
        return option;
      }),
    );
    const known = this.find(this.place.agent.id);
    if (known) {
      this.show(known.id);
      this.onDetails({ ...known });
    } else if (this.agents.length) {
      // The remembered agent is gone: fall back to the default (or the first one there is).
      const fallback = this.find(this.defaultAgent) ?? this.agents[0];
      this.onChoose(fallback.id);
    }
  }
}
