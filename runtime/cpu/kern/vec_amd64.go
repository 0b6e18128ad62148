package kern

const vecAsm = true
